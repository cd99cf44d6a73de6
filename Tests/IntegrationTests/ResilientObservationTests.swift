// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// The Swift client across a daemon restart: the observation resumes by itself, the observer sees loading
/// and back, and no snapshot version is lost or repeated.
@Suite(.serialized) struct ResilientObservationTests {
    @Test func anObservationOutlivesADaemonRestart() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "d1", ["v": 1])
        let stream = LiveGateConnection.observeObjectResiliently(
            socketPath: cluster.socketPath,
            client: "resilient",
            collection: "notes",
            id: "d1"
        )
        let changes = Queue(stream)
        var seen: [ObjectChangedParams] = []
        func next(_ what: String, where predicate: @escaping @Sendable (ObjectChangedParams) -> Bool) async throws {
            let found = try await withTimeout(.seconds(30), "waiting for \(what)") { () -> [ObjectChangedParams] in
                var taken: [ObjectChangedParams] = []
                while let change = try await changes.next() {
                    taken.append(change)
                    if predicate(change) { return taken }
                }
                throw ClusterError("the stream ended while waiting for \(what)")
            }
            seen += found
        }
        try await next("fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
        try await cluster.put("notes", "d1", ["v": 2])
        try await next("v2") { $0.snapshot?.version == 2 && $0.loadingStatus == .loaded }

        #expect(cluster.stopDaemon() == 0)
        try await next("the loss of the daemon") { $0.loadingStatus == .loading }
        try await cluster.put("notes", "d1", ["v": 3])
        _ = try await cluster.startDaemon()
        try await next("v3 after the restart") { $0.snapshot?.version == 3 && $0.loadingStatus == .loaded }

        let versions = seen.compactMap { $0.snapshot?.version }
        #expect(versions == versions.sorted(), "versions went back: \(versions)")
        let loaded = seen.filter { $0.loadingStatus == .loaded }.compactMap { $0.snapshot?.version }
        #expect(loaded == [1, 2, 3], "each version confirmed exactly once: \(seen.map { "\($0.snapshot?.version ?? 0)/\($0.loadingStatus)" })")
    }
}

/// A query's window across a daemon restart: the observer sees loading, then the whole window again
/// (`reset`), changes made meanwhile included, and every update applies to the window it held.
@Suite(.serialized) struct ResilientCollectionTests {
    @Test func aWindowOutlivesADaemonRestart() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("chat", "a", ["room": "r", "at": 10], token: token)
        let stream = LiveGateConnection.observeCollectionResiliently(
            socketPath: cluster.socketPath,
            client: "resilient",
            collection: "chat",
            query: QueryParams(where: ["room": "r"], sort: SortParams(field: "at"))
        )
        let updates = Queue(stream)
        _ = try await elements(updates, until: "the window") { $0.change.loadingStatus == .loaded && $0.items.count == 1 }

        #expect(cluster.stopDaemon() == 0)
        let lost = try await elements(updates, until: "the loss of the daemon") { $0.change.loadingStatus == .loading }
        #expect(lost.last?.items.map(\.id) == ["a"], "the window it had, loading")
        try await cluster.put("chat", "b", ["room": "r", "at": 20], token: token)
        _ = try await cluster.startDaemon()
        let back = try await elements(updates, until: "the window again, with b") {
            $0.items.map(\.id) == ["a", "b"] && $0.change.loadingStatus == .loaded
        }
        #expect(back.first?.change.reset == true, "the first update after the restart replaces the window")
        // A consumer that applies every change set to what it holds ends with the same window.
        var held = lost.last?.items ?? []
        for update in back {
            held = try #require(update.change.apply(to: held), "\(update.change)")
            #expect(held.map(\.id) == update.items.map(\.id))
        }
        try await cluster.put("chat", "c", ["room": "r", "at": 30], token: token)
        _ = try await elements(updates, until: "c, live") { $0.items.map(\.id) == ["a", "b", "c"] }
    }
}

@Suite struct ResumeFilterTests {
    static func change(_ version: Int64?, _ data: DataStatus, _ loading: LoadingStatus) -> ObjectChangedParams {
        ObjectChangedParams(
            token: 1,
            snapshot: version.map { ObjectSnapshot(collection: "c", id: "i", version: $0, data: [:], updatedAt: "t") },
            dataStatus: data,
            loadingStatus: loading
        )
    }

    @Test func aReobservationPassesOnOnlyWhatIsNew() {
        var filter = ResumeFilter()
        func admit(_ change: ObjectChangedParams) -> Bool { filter.admit(change) }
        #expect(admit(Self.change(2, .fresh, .loaded)))
        let notice = filter.disconnected()
        #expect(notice?.loadingStatus == .loading && notice?.snapshot?.version == 2)
        // After reconnecting: the daemon's cached copy of the same version is not news; its confirmation is.
        #expect(!admit(Self.change(2, .local, .loading)))
        #expect(!admit(Self.change(nil, .notExist, .loading)), "nothing cached is not a deletion")
        #expect(admit(Self.change(2, .fresh, .loaded)))
        #expect(!admit(Self.change(2, .fresh, .loaded)), "once")
        #expect(!admit(Self.change(1, .fresh, .loaded)), "never older")
        #expect(admit(Self.change(3, .fresh, .loaded)))
        #expect(admit(Self.change(nil, .notExist, .loaded)), "a confirmed deletion is news")
    }
}
