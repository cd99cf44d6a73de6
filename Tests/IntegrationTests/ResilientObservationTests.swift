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
