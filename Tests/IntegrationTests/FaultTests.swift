// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// Outages provoked through the cloud's fault-injection API: after each, observers converge to the
/// cloud's state, and snapshot versions never go back.
@Suite(.serialized) struct FaultTests {
    func versionsNeverGoBack(_ seen: [ObjectChangedParams]) -> Bool {
        let versions = seen.compactMap { $0.snapshot?.version }
        return zip(versions, versions.dropFirst()).allSatisfy { $0 <= $1 }
    }

    @Test func aDroppedRealtimeLinkReconnectsAndCatchesUp() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "f1", ["v": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fault") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "f1").changes)
            var seen = try await elements(queue, until: "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }

            // The link drops and cannot come back for a while; meanwhile another device writes twice.
            try await cluster.fault(#"{"dropConnections":true,"refuseConnectionsForMs":1500}"#)
            try await eventually("the link to drop") { try await cluster.stats().connections == 0 }
            try await cluster.put("notes", "f1", ["v": 2])
            try await cluster.put("notes", "f1", ["v": 3])

            // Once the cloud accepts connections again, the daemon reconnects, refetches, and the observer converges.
            seen += try await elements(queue, until: "v3 after the outage") { $0.snapshot?.version == 3 && $0.loadingStatus == .loaded }
            #expect(seen.last?.snapshot?.data == ["v": 3])
            #expect(versionsNeverGoBack(seen))
            try await eventually("the daemon to be subscribed again") {
                try await cluster.stats().subscriptions["object:notes/f1"] == 1
            }
            // And the realtime path works again.
            try await cluster.put("notes", "f1", ["v": 4])
            seen += try await elements(queue, until: "v4 live") { $0.snapshot?.version == 4 }
            #expect(versionsNeverGoBack(seen))
        }
        // The daemon resumed from the event log after the outage; it did not fetch the object again.
        #expect(try await cluster.stats().fetches["notes/f1"] == 1)
    }

    /// An object first observed while the link is down is read with the event it is as of; the subscription made
    /// when the link is back resumes from there. The change made meanwhile is replayed: no second fetch, and no
    /// resync notice (a daemon just started, whose link is still connecting, sent one to every first observer).
    @Test func anObjectReadWhileTheLinkIsDownIsResumedFromItsReadWhenTheLinkIsBack() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "f5", ["v": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fault") { daemon in
            try await cluster.fault(#"{"dropConnections":true,"refuseConnectionsForMs":1500}"#)
            try await eventually("the link to drop") { try await cluster.stats().connections == 0 }
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "f5").changes)
            var seen = try await elements(queue, until: "fresh v1, read while the link is down") {
                $0.dataStatus == .fresh && $0.snapshot?.version == 1
            }
            try await cluster.put("notes", "f5", ["v": 2])
            seen += try await elements(queue, until: "v2, replayed once the link is back") { $0.snapshot?.version == 2 }
            #expect(!seen.contains { $0.resync == true }, "continuity was proven: no resync notice \(seen)")
            #expect(seen.last?.dataStatus == .fresh && seen.last?.loadingStatus == .loaded)
            try await eventually("the daemon to be subscribed again") {
                try await cluster.stats().subscriptions["object:notes/f5"] == 1
            }
            try await cluster.put("notes", "f5", ["v": 3])
            seen += try await elements(queue, until: "v3 live") { $0.snapshot?.version == 3 }
            #expect(!seen.contains { $0.resync == true })
        }
        #expect(try await cluster.stats().fetches["notes/f5"] == 1, "read once, then kept current by the replay")
    }

    @Test func whenTheCloudCannotReplayObserversGetAResyncNoticeThenFullState() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--event-retention", "10"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "f4", ["v": 1], token: token)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fault") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "f4").changes)
            var seen = try await elements(queue, until: "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
            // The link goes down; meanwhile the log moves far past what it keeps, and the object changes. The
            // cloud refuses the daemon until then (a refusal of fixed length lost the race to 101 writes on a
            // loaded machine: the daemon was back before the log had moved past it).
            try await cluster.fault(#"{"dropConnections":true,"refuseConnectionsForMs":60000}"#)
            try await eventually("the link to drop") { try await cluster.stats().connections == 0 }
            for n in 1...100 { try await cluster.put("notes", "other", ["n": .integer(n)], token: token) }
            try await cluster.put("notes", "f4", ["v": 2], token: token)
            try await cluster.fault(#"{"refuseConnectionsForMs":0}"#)

            seen += try await elements(queue, until: "v2 after the resync") { $0.snapshot?.version == 2 && $0.loadingStatus == .loaded }
            let notice = try #require(seen.firstIndex { $0.resync == true }, "an explicit resync notice: \(seen)")
            let full = try #require(seen.lastIndex { $0.snapshot?.version == 2 })
            #expect(notice < full, "the notice comes before the full state")
            #expect(seen[notice].loadingStatus == .loading)
            #expect(seen[full].resync == nil)
        }
        #expect(try await cluster.stats().fetches["notes/f4"] == 2, "the resync fetched the object again")
    }

    @Test func failedFetchesAreRetriedUntilTheCloudAnswers() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "f2", ["v": 1])
        try await cluster.fault(#"{"failRequests":2}"#)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fault") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "f2").changes)
            let seen = try await elements(queue, until: "fresh v1") { $0.dataStatus == .fresh }
            let failure = try #require(seen.first { $0.loadingStatus == .error }, "the failure was told: \(seen)")
            #expect(failure.dataStatus == .error, "nothing cached, nothing loaded")
            #expect(failure.error?.code == .cloudUnavailable)
            #expect(failure.error?.message.contains("fails on purpose") == true)
            #expect(seen.last?.snapshot?.data == ["v": 1])
            #expect(seen.last?.error == nil, "a success clears the error")
        }
        // The two refused calls never reached the store: the cloud counts the one fetch it served.
        #expect(try await cluster.stats().fetches["notes/f2"] == 1)
    }

    @Test func expiredTokensAreRenewedWithoutTheClientsNoticing() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let before = try await cluster.stats()
        try await cluster.fault(#"{"expireTokens":true}"#)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fault") { daemon in
            let written = try await daemon.update(collection: "notes", id: "f3", data: ["v": 1])
            #expect(written.version == 1)
        }
        // The daemon renewed its session with its refresh token; it did not send the password again.
        let after = try await cluster.stats()
        #expect(after.refreshes == before.refreshes + 1)
        #expect(after.logins == before.logins)
    }
}
