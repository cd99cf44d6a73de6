// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// The realtime checkpoint kept in the daemon's cache: a restarted daemon resumes its objects' topics from
/// where the previous run left off, and the cloud replays what was missed — no fetch. When the cloud's log
/// no longer reaches back that far, the daemon fetches as before.
@Suite(.serialized) struct CheckpointResumeTests {
    func observeAfterRestart(_ cluster: TestCluster, _ id: String, untilVersion version: Int64) async throws -> [ObjectChangedParams] {
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: id).changes)
            return try await elements(queue, until: "v\(version), fresh") {
                $0.snapshot?.version == version && $0.dataStatus == .fresh && $0.loadingStatus == .loaded
            }
        }
    }

    func observeOnce(_ cluster: TestCluster, _ id: String) async throws {
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: id).changes)
            _ = try await elements(queue, until: "fresh") { $0.dataStatus == .fresh }
        }
    }

    @Test func aRestartedDaemonResumesFromItsCheckpointWithoutFetching() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "r1", ["v": 1], token: token)
        try await observeOnce(cluster, "r1")
        #expect(cluster.stopDaemon() == 0)
        // While the daemon is away, the object changes twice.
        try await cluster.put("notes", "r1", ["v": 2], token: token)
        try await cluster.put("notes", "r1", ["v": 3], token: token)
        try await cluster.startDaemon()
        try await cluster.daemonRealtimeConnected()

        let seen = try await observeAfterRestart(cluster, "r1", untilVersion: 3)
        #expect(seen.first?.dataStatus == .local && seen.first?.snapshot?.version == 1, "the cached copy first: \(seen)")
        // The replay takes the fetch's place: the missed changes arrive, and the result is told once.
        #expect(seen.count == 2, "local v1, then fresh v3, as after a fetch: \(seen)")
        #expect(!seen.contains { $0.resync == true })
        #expect(try await cluster.stats().fetches["notes/r1"] == 1, "resumed from the log, not fetched again")
    }

    @Test func beyondTheLogTheRestartedDaemonFetches() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--event-retention", "10"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "r2", ["v": 1], token: token)
        try await observeOnce(cluster, "r2")
        #expect(cluster.stopDaemon() == 0)
        for n in 1...100 { try await cluster.put("notes", "other", ["n": .integer(n)], token: token) }
        try await cluster.put("notes", "r2", ["v": 2], token: token)
        try await cluster.startDaemon()
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }

        let seen = try await observeAfterRestart(cluster, "r2", untilVersion: 2)
        #expect(seen.last?.snapshot?.data == ["v": 2])
        #expect(try await cluster.stats().fetches["notes/r2"] == 2, "the log no longer reached back: fetched again")
    }

    @Test func aReobservationThatMissedVersionsGetsAResyncNoticeFirst() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "g1", ["v": 1], token: token)
        try await observeOnce(cluster, "g1")
        #expect(cluster.stopDaemon() == 0)
        // While the daemon is away, the client's v1 becomes v3: v2 is never seen by anyone here.
        try await cluster.put("notes", "g1", ["v": 2], token: token)
        try await cluster.put("notes", "g1", ["v": 3], token: token)
        try await cluster.startDaemon()
        // With the link up, the observation resumes from its checkpoint and the replay (v2, v3) is told once, as
        // v3. (Observed while the link still connects, it is fetched instead, and the replay that follows when the
        // link comes up may show v2 before the fetch's answer: every version in order, no skip to tell.)
        try await cluster.daemonRealtimeConnected()
        let seen = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "g1", sinceVersion: 1).changes)
            return try await elements(queue, until: "v3") { $0.snapshot?.version == 3 && $0.dataStatus == .fresh }
        }
        #expect(seen.first?.resync == true && seen.first?.snapshot == nil, "the skip is told before it: \(seen)")
        #expect(!seen.contains { ($0.snapshot?.version ?? 2) <= 1 }, "nothing at or below sinceVersion: \(seen)")

        // Re-observed from the version it has, the next one: no notice.
        try await cluster.put("notes", "g1", ["v": 4], token: token)
        let next = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "g1", sinceVersion: 3).changes)
            return try await elements(queue, until: "v4") { $0.snapshot?.version == 4 && $0.dataStatus == .fresh }
        }
        #expect(!next.contains { $0.resync == true }, "\(next)")
    }

    /// Found deleted by the restarted daemon's fetch (the deletion beyond the cloud's event log), an object
    /// written again through the daemon shows the write at once, pending, at the deletion's version, above a
    /// re-observation's `sinceVersion`. (The live-semantics checker saw the pending write shown at the version
    /// the daemon's cache held, older than the client's after a SIGKILL had cut the cache's last write: held
    /// back by `sinceVersion`, the token went from the deletion to the write's confirmed version as if
    /// versions had been lost. The fetch now learns the deletion's version from the cloud's 404; this
    /// example passes without that too, as the daemon learns it here otherwise: it pins the promise, and
    /// CloudConformanceTests the 404's `currentVersion`.)
    @Test func anObjectFoundDeletedAfterARestartAndWrittenAgainShowsTheWritePendingAtTheDeletionsVersion() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--event-retention", "10"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "d1", ["v": 1], token: token)
        try await observeOnce(cluster, "d1")  // the daemon's cache holds v1
        #expect(cluster.stopDaemon() == 0)
        // v2, which the client is to have seen (the daemon lost it), then the deletion, v3.
        try await cluster.put("notes", "d1", ["v": 2], token: token)
        _ = try await cluster.delete("notes", "d1")
        for n in 1...20 { try await cluster.put("notes", "other", ["n": .integer(n)], token: token) }
        try await cluster.startDaemon()
        try await cluster.daemonRealtimeConnected()

        let seen = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "d1", sinceVersion: 2).changes)
            _ = try await elements(queue, until: "the deletion") { $0.dataStatus == .notExist && $0.loadingStatus == .loaded }
            let written = try await daemon.update(collection: "notes", id: "d1", data: ["v": 4])
            #expect(written.version == 4)
            return try await elements(queue, until: "v4") { $0.snapshot?.version == 4 && $0.dataStatus == .fresh }
        }
        let pending = seen.first { $0.pendingWrites == true }
        #expect(pending?.snapshot?.version == 3 && pending?.snapshot?.data == ["v": 4], "the write, pending, at the deletion's version: \(seen)")
        #expect(!seen.contains { ($0.snapshot?.version ?? 3) <= 2 }, "nothing at or below sinceVersion: \(seen)")
    }

    /// How many times the cloud answered a query of `collection`.
    func queryFetches(_ cluster: TestCluster, _ collection: String) async throws -> Int {
        try await cluster.stats().fetches.filter { $0.key.hasPrefix("query:") && $0.key.contains(#""collection":"\#(collection)""#) }
            .values.reduce(0, +)
    }

    @Test func aRestartedDaemonResumesAQueryWindowFromItsStoredResultWithoutFetching() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for (id, rank) in [("a", 10), ("b", 20), ("c", 30)] {
            try await cluster.put("chat", id, ["room": "r", "rank": .integer(rank)], token: token)
        }
        let query = QueryParams(where: ["room": "r"], sort: SortParams(field: "rank"))
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let updates = Queue(try await daemon.observeCollection(collection: "chat", query: query).updates)
            _ = try await elements(updates, until: "the fresh window") { $0.change.dataStatus == .fresh && $0.change.loadingStatus == .loaded }
        }
        #expect(try await queryFetches(cluster, "chat") == 1)
        #expect(cluster.stopDaemon() == 0)
        // While the daemon is away: b moves past c, c leaves (deleted), d arrives, a is modified.
        try await cluster.put("chat", "b", ["room": "r", "rank": 40], token: token)
        _ = try await cluster.delete("chat", "c")
        try await cluster.put("chat", "d", ["room": "r", "rank": 25], token: token)
        try await cluster.put("chat", "a", ["room": "r", "rank": 10, "edited": true], token: token)
        try await cluster.startDaemon()
        try await cluster.daemonRealtimeConnected()

        let seen = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "checkpoint") { daemon in
            let updates = Queue(try await daemon.observeCollection(collection: "chat", query: query).updates)
            return try await elements(updates, until: "the fresh window") { $0.change.dataStatus == .fresh && $0.change.loadingStatus == .loaded }
        }
        #expect(seen.first?.change.dataStatus == .local && seen.first?.items.map(\.id) == ["a", "b", "c"], "the stored window first")
        #expect(seen.last?.items.map(\.id) == ["a", "d", "b"], "then what the replay made of it: \(seen.map { $0.items.map(\.id) })")
        #expect(seen.last?.items.first?.data["edited"] == true)
        #expect(seen.count == 2, "local, then fresh once, as after a fetch: \(seen.map(\.change.loadingStatus))")
        #expect(!seen.contains { $0.change.resync == true })
        #expect(try await queryFetches(cluster, "chat") == 1, "resumed from the stored result, not fetched again")
    }

    /// Found by the Python client's test: a window paged while it still showed its stale cached first page got a
    /// page fetched beyond the stale items, and the mix was sent as fresh (wrong items, wrong count) until a resync.
    @Test func aWindowPagedWhileItShowsItsCachedPageIsFetchedWholeBeforeItIsFresh() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        var ranks = ["m1": 30, "m2": 10, "m3": 20, "m4": 40, "m5": 50]
        for (id, rank) in ranks { try await cluster.put("chat", id, ["room": "r", "rank": .integer(rank)], token: token) }
        let query = QueryParams(where: ["room": "r"], sort: SortParams(field: "rank"))
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "paging") { daemon in
            let updates = Queue(try await daemon.observeCollection(collection: "chat", query: query, pageSize: 2).updates)
            _ = try await elements(updates, until: "the fresh first page") { $0.change.dataStatus == .fresh && $0.change.loadingStatus == .loaded }
        }
        #expect(cluster.stopDaemon() == 0)
        // While the daemon is away, two objects move into the first page: its cached copy is stale.
        ranks["m4"] = 5
        ranks["m6"] = 1
        for id in ["m4", "m6"] { try await cluster.put("chat", id, ["room": "r", "rank": .integer(ranks[id]!)], token: token) }
        try await cluster.startDaemon()
        let expected = ranks.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.prefix(4).map(\.key)

        let seen = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "paging") { daemon in
            let observation = try await daemon.observeCollection(collection: "chat", query: query, pageSize: 2)
            let updates = Queue(observation.updates)
            var seen = try await elements(updates, until: "the cached page") { $0.change.dataStatus == .local }
            #expect(seen.last?.items.map(\.id) == ["m2", "m3"], "the stale cached page")
            #expect(try await daemon.nextPage(token: observation.token))
            seen += try await elements(updates, until: "two fresh pages") {
                $0.change.dataStatus == .fresh && $0.change.loadingStatus == .loaded && $0.items.count == 4
            }
            return seen
        }
        let firstFresh = seen.first { $0.change.dataStatus == .fresh }
        #expect(firstFresh?.items.map(\.id) == expected, "\(seen.map { ($0.items.map(\.id), $0.change.dataStatus, $0.change.count) })")
        #expect(firstFresh?.change.count == 6)
    }
}
