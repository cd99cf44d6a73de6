// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// The durable write outbox, through the daemon: writes show at once marked pending, are sent in order
/// through outages and across a daemon restart, and end confirmed or rolled back with the error.
@Suite(.serialized) struct OutboxTests {
    @Test func aQueuedWriteShowsPendingAtOnceThenConfirmedAndARejectedOneIsRolledBack() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "o1", ["a": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "o1").changes)
            _ = try await elements(queue, until: "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }

            try await daemon.queueUpdate(collection: "notes", id: "o1", data: ["b": 2], merge: true)
            // The realtime event of the write may come before the cloud's answer to it: the pending mark
            // goes with whichever is last.
            let seen = try await elements(queue, until: "the confirmation") { $0.snapshot?.version == 2 && $0.pendingWrites == nil }
            let pending = try #require(seen.first)
            #expect(pending.pendingWrites == true && pending.snapshot?.version == 1, "\(seen)")
            #expect(pending.snapshot?.data == ["a": 1, "b": 2], "the write shows before the cloud has it")
            #expect(seen.last?.pendingWrites == nil && seen.last?.snapshot?.data == ["a": 1, "b": 2])

            // A stale ifVersion: shown pending, then rolled back with the conflict.
            try await daemon.queueUpdate(collection: "notes", id: "o1", data: ["a": 99], ifVersion: 1)
            let rejected = try await elements(queue, until: "the rollback") { $0.error != nil }
            #expect(rejected.first?.pendingWrites == true && rejected.first?.snapshot?.data == ["a": 99], "\(rejected)")
            #expect(rejected.last?.error?.code == .versionConflict, "\(rejected)")
            #expect(rejected.last?.snapshot?.data == ["a": 1, "b": 2] && rejected.last?.pendingWrites == nil)
        }
        #expect(try await cluster.get("notes", "o1").version == 2, "the rejected write never reached the cloud")
    }

    @Test func aWriteWhoseAnswerWasLostIsAppliedOnceAndNotRejected() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "once", ["n": 0])
        // The cloud applies the next two writes and loses each answer; the outbox resends them under the
        // same write id. Without it, the resent ifVersion: 1 would be a conflict (the cloud has version 2)
        // and the write rolled back although the cloud holds it; the merge would be applied twice.
        try await cluster.fault(#"{"loseWriteAnswers":2}"#)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "once") { daemon in
            let updated = try await daemon.update(collection: "notes", id: "once", data: ["n": 1], ifVersion: 1)
            #expect(updated.version == 2 && updated.data == ["n": 1])
            let merged = try await daemon.update(collection: "notes", id: "once", data: ["m": 1], merge: true)
            #expect(merged.version == 3 && merged.data == ["n": 1, "m": 1])
        }
        #expect(try await cluster.get("notes", "once").version == 3, "each write applied once")
    }

    @Test func queuedWritesSurviveAnOutageAndADaemonRestartAndArriveInOrder() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        // The cloud refuses every REST call: the writes cannot leave the daemon.
        try await cluster.fault(#"{"failRequests":100000}"#)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "o2").changes)
            try await daemon.queueUpdate(collection: "notes", id: "o2", data: ["a": 1])
            try await daemon.queueUpdate(collection: "notes", id: "o2", data: ["b": 2], merge: true)
            try await daemon.queueUpdate(collection: "notes", id: "o2", data: ["a": 3], merge: true)
            let seen = try await elements(queue, until: "all three shown") { $0.snapshot?.data == ["a": 3, "b": 2] }
            #expect(seen.last?.pendingWrites == true && seen.last?.snapshot?.version == 0, "pending, not created yet: \(seen)")
        }
        // The daemon stops with the writes unsent, and starts again once the cloud serves.
        #expect(cluster.stopDaemon() == 0)
        try await cluster.fault(#"{"failRequests":0}"#)
        try await cluster.startDaemon()
        try await eventually("the three writes in the cloud") { (try? await cluster.get("notes", "o2"))?.version == 3 }
        let stored = try await cluster.get("notes", "o2")
        #expect(stored.data == ["a": 3, "b": 2], "replace, then the two merges, in order")
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "o2").changes)
            let seen = try await elements(queue, until: "the confirmed state") { $0.snapshot?.version == 3 && $0.pendingWrites == nil }
            #expect(seen.last?.snapshot?.data == ["a": 3, "b": 2])
        }
    }

    @Test func aQueuedWriteShowsInTheWindowsItMatchesAtOnce() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("chat", "a", ["room": "r", "at": 10], token: token)
        try await cluster.put("chat", "c", ["room": "r", "at": 30], token: token)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { daemon in
            let query = QueryParams(where: ["room": "r"], sort: SortParams(field: "at"))
            let window = Queue(try await daemon.observeCollection(collection: "chat", query: query).updates)
            _ = try await elements(window, until: "the window") { $0.change.loadingStatus == .loaded && $0.items.count == 2 }

            // A message sent from here shows at once at its place, marked pending; then the cloud's copy.
            try await daemon.queueUpdate(collection: "chat", id: "b", data: ["room": "r", "at": 20])
            let seen = try await elements(window, until: "the confirmed message") { $0.change.pendingIds == nil && $0.items.count == 3 }
            let pending = try #require(seen.first)
            #expect(pending.items.map(\.id) == ["a", "b", "c"] && pending.change.pendingIds == ["b"], "\(seen.map(\.change))")
            #expect(pending.items[1].version == 0)
            #expect(seen.last?.items[1].version == 1)

            // A rejected write (stale version) shows, then its item comes back as the cloud has it.
            try await daemon.queueUpdate(collection: "chat", id: "a", data: ["room": "r", "at": 99], ifVersion: 7)
            let rejected = try await elements(window, until: "the rollback") { $0.change.pendingIds == nil && $0.items.first?.id == "a" }
            #expect(rejected.first?.items.map(\.id) == ["b", "c", "a"] && rejected.first?.change.pendingIds == ["a"], "\(rejected.map(\.change))")
            #expect(rejected.last?.items.map(\.id) == ["a", "b", "c"])

            // A window opened while a write waits (the cloud refuses every call) shows it from its first state.
            try await cluster.fault(#"{"failRequests":100000}"#)
            try await daemon.queueUpdate(collection: "chat", id: "d", data: ["room": "r", "at": 40])
            let newest = QueryParams(where: ["room": "r"], sort: SortParams(field: "at", descending: true))
            let opened = Queue(try await daemon.observeCollection(collection: "chat", query: newest).updates)
            let first = try #require(try await withTimeout(.seconds(20), "the new window's first state") { try await opened.next() })
            #expect(first.items.first?.id == "d" && first.change.pendingIds == ["d"], "\(first.change)")
            try await cluster.fault(#"{"failRequests":0}"#)
            // The window's fetch (refused until now) is retried; d is confirmed: the cloud's window, d in it.
            let confirmed = try await elements(opened, until: "d confirmed in the fetched window") {
                $0.change.pendingIds == nil && $0.items.count == 4 && $0.items.first?.version == 1
            }
            #expect(confirmed.last?.items.map(\.id) == ["d", "c", "b", "a"])
        }
    }
}
