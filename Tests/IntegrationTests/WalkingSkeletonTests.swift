// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// Waits for the first change that satisfies `predicate`, skipping the others; fails after `timeout`.
func change(
    _ queue: Queue<ObjectChangedParams>,
    timeout: Duration = .seconds(20),
    _ what: String,
    where predicate: @escaping @Sendable (ObjectChangedParams) -> Bool
) async throws -> ObjectChangedParams {
    try await withTimeout(timeout, "waiting for \(what)") {
        while let change = try await queue.next() {
            if predicate(change) { return change }
        }
        throw ClusterError("the observation ended while waiting for \(what)")
    }
}

@Suite(.serialized) struct WalkingSkeletonTests {
    @Test func twoClientsReceiveALiveUpdateWithOneFetchAndOneRealtimeSubscription() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        // With the realtime link up first, the count of fetches below is exact (see the write test).
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "n1", ["text": "first"])

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "test-a") { a in
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "test-b") { b in
                let changesA = Queue(try await a.observeObject(collection: "notes", id: "n1").changes)
                let changesB = Queue(try await b.observeObject(collection: "notes", id: "n1").changes)
                for queue in [changesA, changesB] {
                    let fresh = try await change(queue, "fresh v1") { $0.dataStatus == .fresh }
                    #expect(fresh.snapshot?.version == 1)
                    #expect(fresh.snapshot?.data == ["text": "first"])
                }

                // A remote user changes the object through the cloud's REST API.
                try await cluster.put("notes", "n1", ["text": "second"])
                for queue in [changesA, changesB] {
                    let update = try await change(queue, "v2") { $0.snapshot?.version == 2 }
                    #expect(update.snapshot?.data == ["text": "second"])
                    #expect(update.dataStatus == .fresh)
                    #expect(update.loadingStatus == .loaded)
                }

                // The cloud saw one fetch and holds one realtime subscription for the object, for two clients.
                let stats = try await cluster.stats()
                #expect(stats.fetches["notes/n1"] == 1)
                #expect(stats.subscriptions["object:notes/n1"] == 1)
                #expect(stats.connections == 1)
            }
        }
    }

    @Test func aCachedObjectAnswersLocalThenFreshAndInvalidationStopsOnlyThatToken() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await cluster.put("notes", "n2", ["text": "v1"])

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "first") { first in
            // The first observation caches v1, then ends: the daemon releases the realtime subscription.
            let observation = try await first.observeObject(collection: "notes", id: "n2")
            _ = try await change(Queue(observation.changes), "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
            // Fresh can come from the fetch before the cloud has the subscription: wait for it, or its absence
            // below would prove nothing (and v2 could reach the lingering observation).
            try await eventually("the daemon's subscription") { try await cluster.stats().subscriptions["object:notes/n2"] == 1 }
            try await first.invalidate(token: observation.token)
        }
        try await eventually("the daemon to release its subscription") {
            try await cluster.stats().subscriptions["object:notes/n2"] == nil
        }
        // Meanwhile the object changes in the cloud.
        try await cluster.put("notes", "n2", ["text": "v2"])

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "second") { second in
            let changes = Queue(try await second.observeObject(collection: "notes", id: "n2").changes)
            let local = try await change(changes, "the first notification") { _ in true }
            #expect(local.dataStatus == .local)
            #expect(local.loadingStatus == .loading)
            #expect(local.snapshot?.version == 1)
            #expect(local.snapshot?.data == ["text": "v1"])
            let fresh = try await change(changes, "the next notification") { _ in true }
            #expect(fresh.dataStatus == .fresh)
            #expect(fresh.loadingStatus == .loaded)
            #expect(fresh.snapshot?.version == 2)
            #expect(fresh.snapshot?.data == ["text": "v2"])

            // A raw client observes too, then invalidates; the second client's token goes on.
            try await RawConnection.with(cluster.socketPath) { raw in
                try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"notes","id":"n2"}}"#)
                #expect(try await raw.next() == #"{"id":1,"jsonrpc":"2.0","result":{"token":1}}"#)
                #expect(try await raw.next().contains(#""version":2"#))
                try await raw.send(#"{"jsonrpc":"2.0","id":2,"method":"token.invalidate","params":{"token":1}}"#)
                #expect(try await raw.next() == #"{"id":2,"jsonrpc":"2.0","result":{"invalidated":true}}"#)

                try await cluster.put("notes", "n2", ["text": "v3"])
                let update = try await change(changes, "v3") { $0.snapshot?.version == 3 }
                #expect(update.snapshot?.data == ["text": "v3"])

                // Anything the daemon had queued for the raw client would come before this answer.
                try await raw.send(#"{"jsonrpc":"2.0","id":3,"method":"token.invalidate","params":{"token":1}}"#)
                let answer = try await raw.next()
                #expect(answer.hasPrefix(#"{"error":{"code":-32001,"#), "no notification after invalidation: \(answer)")
                #expect(answer.hasSuffix(#""id":3,"jsonrpc":"2.0"}"#))
            }
        }
    }

    @Test func observeOnceFiresExactlyOnce() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await cluster.put("notes", "once", ["n": 1])
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"notes","id":"once","once":true}}"#)
            #expect(try await raw.next() == #"{"id":1,"jsonrpc":"2.0","result":{"token":1}}"#)
            let only = try await raw.next()
            #expect(only.contains(#""dataStatus":"fresh""#), "nothing cached: the one notification is the fresh one")
            try await cluster.put("notes", "once", ["n": 2])
            try await raw.send(#"{"jsonrpc":"2.0","id":2,"method":"token.invalidate","params":{"token":1}}"#)
            let answer = try await raw.next()
            #expect(answer.hasPrefix(#"{"error":{"code":-32001,"#), "the token ended by itself after firing: \(answer)")
        }
    }

    @Test func writeThroughTheDaemonReachesObserversAndTheCloud() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        // Observations started before the realtime link is up are fetched again once it is (to prove
        // continuity); wait for the link so that the fetch count below is exact.
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "writer") { daemon in
            let changes = Queue(try await daemon.observeObject(collection: "notes", id: "w1").changes)
            let missing = try await change(changes, "notExist after loading") { $0.loadingStatus == .loaded }
            #expect(missing.dataStatus == .notExist)
            #expect(missing.snapshot == nil)

            let created = try await daemon.create(collection: "notes", id: "w1", data: ["text": "made here"])
            #expect(created.version == 1)
            let seen = try await change(changes, "v1") { $0.snapshot?.version == 1 }
            #expect(seen.snapshot?.data == ["text": "made here"])

            do {
                _ = try await daemon.create(collection: "notes", id: "w1", data: ["text": "again"])
                Issue.record("creating an existing object must fail")
            } catch let error as LiveGateError {
                #expect(error.code == .versionConflict)
                #expect(error.data?["currentVersion"] == .number(1))
            }
            let updated = try await daemon.update(collection: "notes", id: "w1", data: ["text": "edited"], ifVersion: 1)
            #expect(updated.version == 2)
            _ = try await change(changes, "v2") { $0.snapshot?.version == 2 }
        }
        let stats = try await cluster.stats()
        #expect(stats.fetches["notes/w1"] == 1, "writes do not cost fetches\n\(cluster.daemonLog)")
    }

    @Test func shutdownTellsClientsAndExitsCleanly() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"t","protocol":1}}"#)
            _ = try await raw.next()
            let status = cluster.stopDaemon()
            #expect(status == 0)
            let goodbye = try await raw.next()
            #expect(goodbye.contains(#""method":"connection.closing""#))
        }
        #expect(!FileManager.default.fileExists(atPath: cluster.socketPath), "the daemon removes the socket it bound")
    }
}

@Suite(.serialized) struct DeletionTests {
    @Test func deletionThroughTheDaemonIsNotifiedAndVersionsGoOn() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "gone", ["text": "here", "n": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "deleter") { daemon in
            let changes = Queue(try await daemon.observeObject(collection: "notes", id: "gone").changes)
            _ = try await change(changes, "fresh v1") { $0.dataStatus == .fresh }

            let merged = try await daemon.update(collection: "notes", id: "gone", data: ["n": nil, "x": true], merge: true)
            #expect(merged.version == 2)
            #expect(merged.data == ["text": "here", "x": true])

            do {
                try await daemon.delete(collection: "notes", id: "gone", ifVersion: 1)
                Issue.record("a stale ifVersion must not delete")
            } catch let error as LiveGateError {
                #expect(error.code == .versionConflict)
                #expect(error.data?["currentVersion"] == .number(2))
            }
            #expect(try await daemon.delete(collection: "notes", id: "gone", ifVersion: 2) == 3)
            let gone = try await change(changes, "the deletion") { $0.dataStatus == .notExist }
            #expect(gone.snapshot == nil)
            #expect(gone.loadingStatus == .loaded)

            do {
                try await daemon.delete(collection: "notes", id: "gone")
                Issue.record("deleting a deleted object must fail")
            } catch let error as LiveGateError {
                #expect(error.code == .notFound)
            }
            do {
                _ = try await daemon.update(collection: "notes", id: "gone", data: ["n": 2], merge: true)
                Issue.record("merging into a deleted object must fail")
            } catch let error as LiveGateError {
                #expect(error.code == .notFound)
            }
            let again = try await daemon.create(collection: "notes", id: "gone", data: ["text": "again"])
            #expect(again.version == 4, "versions go on after a deletion")
            _ = try await change(changes, "v4") { $0.snapshot?.version == 4 }
        }
        // A new observer of the deleted-then-created object starts from the cache, which kept the tombstone's
        // successor; and the cloud agrees.
        #expect(try await cluster.get("notes", "gone").version == 4)
    }
}
