// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import Logging
import Testing

/// What the engine leaves in its cache when it stops: the realtime checkpoint of the last event it saw (each
/// event's is written with its object, in the object's row), so that the next run resumes from there.
@Suite(.serialized) struct EngineStopTests {
    @Test func aStoppedEngineLeavesItsLastCheckpointInTheCache() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "p1", ["n": 1], token: token)
        var lastSeen: Int64?
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            let changes = Received<LiveObjectChange>()
            let observation = await engine.object(collection: "posts", id: "p1").observe { changes.add($0) }
            try await changes.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh }
            // Three events within a second, each checkpointed with its object.
            for n in 2...4 { try await cluster.put("posts", "p1", ["n": .integer(n)], token: token) }
            try await changes.wait(for: "v4") { $0.last?.snapshot?.version == 4 }
            lastSeen = await engine.realtime.lastSeq(of: .object(EntityKey(collection: "posts", id: "p1")))
            withExtendedLifetime(observation) {}
        }
        let seq = try #require(lastSeen)
        // The next run's engine, on the same state directory, before it runs.
        let next = try LiveClient(
            configuration: LiveSDKConfiguration(
                cloudURL: cluster.cloudURL,
                credentials: Credentials(username: TestCluster.username, password: TestCluster.password),
                stateDirectory: cluster.directory + "/engine"
            ),
            logger: Logger(label: "engine-test")
        )
        let stored = try await next.cache.checkpoint(.object(EntityKey(collection: "posts", id: "p1")))
        await next.close()
        #expect(stored == seq, "the checkpoint of the last event seen (\(seq))")
    }

    @Test func aStoppedEnginesCacheIsOneFileWithAnEmptyWAL() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        for n in 1...20 { try await cluster.put("posts", "w\(n)", ["n": .integer(n)], token: token) }
        try await withEngine(cluster) { engine in
            for n in 1...20 {
                let changes = Received<LiveObjectChange>()
                let observation = await engine.object(collection: "posts", id: "w\(n)").observe { changes.add($0) }
                try await changes.wait(for: "fresh w\(n)") { $0.last?.dataStatus == .fresh }
                withExtendedLifetime(observation) {}
            }
        }
        // A clean stop writes every committed page into the database file and truncates the WAL: the file alone,
        // copied without its WAL, holds what the engine cached.
        let directory = cluster.directory + "/engine"
        let wal = (try? FileManager.default.attributesOfItem(atPath: directory + "/cache.sqlite-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(wal == 0, "the WAL after a clean stop holds \(wal) bytes")
        let copy = cluster.directory + "/copy"
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: directory + "/cache.sqlite", toPath: copy + "/cache.sqlite")
        let next = try LiveClient(
            configuration: LiveSDKConfiguration(
                cloudURL: cluster.cloudURL,
                credentials: Credentials(username: TestCluster.username, password: TestCluster.password),
                stateDirectory: copy
            ),
            logger: Logger(label: "engine-test")
        )
        let cached = try await next.cache.entity(EntityKey(collection: "posts", id: "w20"))
        await next.close()
        #expect(cached?.version == 1, "the database file alone holds the cached entity")
    }

    /// While the engine runs, its cache's WAL is copied into the database file beside the writer
    /// (`WALCheckpointer`), not inside a commit of the engine's loop once the WAL passes SQLite's threshold. 40
    /// objects of 20 KB cached (~200 pages of WAL, short of both SQLite's 1,000 and the writer's backstop): the
    /// database file grows to hold them while the engine still runs.
    @Test func theCacheIsCheckpointedBesideTheEnginesWrites() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let text = JSONValue.string(String(repeating: "x", count: 20_000))
        for n in 1...40 { try await cluster.put("posts", "big\(n)", ["text": text], token: token) }
        let file = cluster.directory + "/engine/cache.sqlite"
        @Sendable func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue ?? 0 }
        try await withEngine(cluster) { engine in
            let before = size()
            var observations: [NotificationToken] = []
            let fresh = Received<LiveObjectChange>()
            for n in 1...40 {
                observations.append(await engine.object(collection: "posts", id: "big\(n)").observe { fresh.add($0) })
            }
            try await fresh.wait(for: "all 40 fresh") { $0.filter { $0.dataStatus == .fresh }.count >= 40 }
            try await eventually("the cache's file holding the 800 KB cached (\(before) bytes before)") { size() >= before + 700_000 }
            withExtendedLifetime(observations) {}
        }
    }
}
