// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import Testing

@testable import LiveSDK

/// What the engine leaves in its cache when it stops: the realtime checkpoints not yet due (at most one per
/// 64 events or per second and topic while running) are written then, so that the next run resumes from the
/// last event it saw.
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
            // Three events within a second: the first is checkpointed at once, the other two are not due yet.
            for n in 2...4 { try await cluster.put("posts", "p1", ["n": .number(Double(n))], token: token) }
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
        let stored = try await next.cache.checkpoint("object:posts/p1")
        await next.close()
        #expect(stored == seq, "the checkpoint of the last event seen (\(seq)), written when the engine stopped")
    }

    @Test func aStoppedEnginesCacheIsOneFileWithAnEmptyWAL() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        for n in 1...20 { try await cluster.put("posts", "w\(n)", ["n": .number(Double(n))], token: token) }
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
}
