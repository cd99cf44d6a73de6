// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import LiveCloudAPI
import LiveJSON
import Logging
import Testing
import WSClient

/// The cloud's realtime protocol, spoken directly over a real WebSocket: resuming with `since`.
@Suite(.serialized) struct RealtimeResumeTests {
    func withRealtime(
        _ cluster: TestCluster,
        token: String,
        _ body:
            @escaping @Sendable (
                _ send: @Sendable (any Encodable & Sendable) async throws -> Void, _ next: () async throws -> RealtimeServerMessage
            )
            async throws -> Void
    ) async throws {
        try await withRealtimeConnection(to: cluster.cloudURL, token: token, body)
    }

    let topic = Topic.object(EntityKey(collection: "notes", id: "r"))

    @Test func aResumingSubscriberGetsEveryMissedEventInOrder() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let topic = topic
        let baseline = ClusterBox<Int64>()
        try await withRealtime(cluster, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            let ack = try await next()
            #expect(ack.op == .ack && ack.ref == 1)
            baseline.set(try #require(ack.seq))
        }
        // Disconnected: 1,000 writes happen.
        for n in 1...1000 { try await cluster.put("notes", "r", ["n": .integer(n)], token: token) }

        try await withRealtime(cluster, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: topic, since: baseline.get()))
            let ack = try await next()
            #expect(ack.op == .ack && ack.ref == 2)
            #expect(ack.resync == nil)
            var previousSeq = try #require(baseline.get())
            for n in 1...1000 {
                let event = try await next()
                #expect(event.op == .event)
                #expect(event.entity?.version == Int64(n), "in order, none missing")
                #expect(event.entity?.data == ["n": .integer(n)])
                #expect((event.seq ?? 0) > previousSeq)
                previousSeq = event.seq ?? previousSeq
            }
            // After the replay, live events follow, without a gap or a repeat.
            try await cluster.put("notes", "r", ["n": 1001], token: token)
            let live = try await next()
            #expect(live.entity?.version == 1001)
            #expect(live.seq == previousSeq + 1)
        }
    }

    @Test func aSubscriberResumingFromBeyondTheLogIsToldToResync() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--event-retention", "10"])
        defer { cluster.stop() }
        let token = try await cluster.login()
        let topic = topic
        try await cluster.put("notes", "r", ["n": 0], token: token)
        try await withRealtime(cluster, token: token) { send, next in
            // The writes' events heard on their own topic, to the last: the cloud's realtime side has published
            // them (on PostgreSQL its event pump does so after the writes are answered), so its head is seq 101.
            let other = Topic.object(EntityKey(collection: "notes", id: "other"))
            try await send(RealtimeClientMessage(op: .subscribe, ref: 0, topic: other))
            #expect(try await next().op == .ack)
            for n in 1...100 { try await cluster.put("notes", "other", ["n": .integer(n)], token: token) }
            while try await next().seq != 101 {}
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic, since: 1))
            let ack = try await next()
            #expect(ack.op == .ack)
            #expect(ack.resync == true, "the log no longer holds the events after seq 1")
            #expect(ack.seq == 101)
            try await cluster.put("notes", "r", ["n": 1], token: token)
            let live = try await next()
            #expect(live.op == .event && live.entity?.version == 2, "live events still come")
        }
    }
}
