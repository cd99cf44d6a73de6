// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Testing

/// On PostgreSQL a write is answered when it commits, and its event reaches the realtime subscribers once the
/// instance's event pump has read it from the log, a moment after. Here the pump is held back on purpose
/// (`delayEventPublicationMs`), so that moment is long: a subscription made meanwhile must still start at or past
/// every write already answered (the cloud waits for the pump first). Without that wait, CI saw both failures
/// below now and then under load, when the pump was a few milliseconds behind.
@Suite(.serialized) struct EventPublicationLagTests {
    static let lag = #"{"delayEventPublicationMs":1500}"#

    @Test func aResumptionReplaysAWriteAnsweredBeforeTheEventPumpPublishedIt() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, backend: .postgres)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let topic = Topic.object(EntityKey(collection: "notes", id: "lag"))
        _ = try await cluster.put("notes", "lag", ["text": "v1"], token: token)
        let baseline = ClusterBox<Int64>()
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            let ack = try await next()
            #expect(ack.op == .ack)
            baseline.set(try #require(ack.seq))
        }
        try await cluster.fault(Self.lag)
        let written = try await cluster.put("notes", "lag", ["text": "v2"], token: token)
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            let asked = ContinuousClock.now
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: topic, since: baseline.get()))
            let ack = try await next()
            #expect(ack.op == .ack && ack.resync == nil && ack.replayed == 1, "the answered write is replayed: \(ack)")
            let replayed = try await next()
            #expect(replayed.op == .event && replayed.entity?.version == written.version, "\(replayed)")
            // The ack waited for the pump: it is not the write's live event that came, a moment later.
            #expect(ContinuousClock.now - asked < .seconds(10))
        }
    }

    @Test func aNewSubscriptionIsAckedPastAWriteAnsweredBeforeTheEventPumpPublishedIt() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, backend: .postgres)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let topic = Topic.object(EntityKey(collection: "notes", id: "fresh"))
        _ = try await cluster.put("notes", "fresh", ["text": "v1"], token: token)
        try await cluster.fault(Self.lag)
        _ = try await cluster.put("notes", "fresh", ["text": "v2"], token: token)
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            let ack = try await next()
            #expect(ack.op == .ack)
            // A fetch after the ack reads v2; the ack's seq must be at or past v2's event, or the event would
            // follow as news after it (and a client resuming from the ack would count v2 missed).
            let answer = try await cluster.call(.POST, CloudPath.readObjects, json: #"{"keys":[{"collection":"notes","id":"fresh"}]}"#, token: token)
            #expect(answer.status == 200, "\(answer)")
            let read = try JSONDecoder().decode(ReadObjectsResponse.self, from: Data(answer.body.utf8))
            let seq = try #require(ack.seq)
            #expect(seq >= (read.seq ?? 0), "acked at \(seq), behind the log's head \(String(describing: read.seq)) as of the write")
        }
    }

    @Test func aMessageSentWhileShutOutNeverReachesTheSubscriberLiveWhenThePumpLags() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--stream", "songs"], otherUsers: ["bob"], backend: .postgres)
        defer { cluster.stop() }
        try await StreamRevocationScenario.run(on: cluster) { try await cluster.fault(Self.lag) }
    }

    @Test func aCachedObjectIsAnsweredFreshOnlyWithTheWriteAnsweredWhileItWasNotObserved() async throws {
        let cluster = try await TestCluster.start(backend: .postgres)
        defer { cluster.stop() }
        _ = try await cluster.put("notes", "cached", ["text": "v1"])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "first") { first in
            let observation = try await first.observeObject(collection: "notes", id: "cached")
            _ = try await change(Queue(observation.changes), "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
            try await eventually("the daemon's subscription") { try await cluster.stats().subscriptions["object:notes/cached"] == 1 }
            try await first.invalidate(token: observation.token)
        }
        try await eventually("the daemon to release its subscription") {
            try await cluster.stats().subscriptions["object:notes/cached"] == nil
        }
        try await cluster.fault(Self.lag)
        _ = try await cluster.put("notes", "cached", ["text": "v2"])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "second") { second in
            let changes = Queue(try await second.observeObject(collection: "notes", id: "cached").changes)
            let local = try await change(changes, "the cached copy") { _ in true }
            #expect(local.dataStatus == .local && local.snapshot?.version == 1)
            let fresh = try await change(changes, "the next notification") { _ in true }
            #expect(fresh.dataStatus == .fresh && fresh.snapshot?.version == 2, "fresh only with the answered write: \(fresh)")
        }
    }

    @Test func aPumpThatDoesNotCatchUpClosesTheConnectionRatherThanAckBehindIt() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, backend: .postgres)
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.fault(#"{"delayEventPublicationMs":60000}"#)
        _ = try await cluster.put("notes", "stuck", ["text": "v1"], token: token)
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            let asked = ContinuousClock.now
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: .object(EntityKey(collection: "notes", id: "stuck"))))
            await #expect(throws: ClusterError.self, "closed, not acked") { _ = try await next() }
            #expect(ContinuousClock.now - asked >= .seconds(9), "after the wait, not at once")
        }
    }
}
