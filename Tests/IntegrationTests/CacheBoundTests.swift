// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// The cache's size bound: unobserved entities are evicted least recently used first; observed ones stay.
@Suite(.serialized) struct CacheBoundTests {
    /// The ids in the daemon's cache file, read with Python's sqlite3 (the file is in WAL mode; reading is safe).
    func cachedIDs(_ cluster: TestCluster) throws -> Set<String> {
        let script = "import sqlite3,sys; print('\\n'.join(r[0] for r in sqlite3.connect(sys.argv[1]).execute('select id from entity')))"
        let result = try runToCompletion("/usr/bin/python3", ["-c", script, cluster.directory + "/state/cache.sqlite"], includingErrors: false)
        return Set(result.output.split(separator: "\n").map(String.init))
    }

    /// A cluster whose daemon keeps at most 5 objects in its cache, with `count` objects `prefix0`, `prefix1`, …
    /// in `collection` on its cloud.
    func clusterBoundedToFive(objects count: Int, in collection: String, named prefix: String) async throws -> TestCluster {
        let cluster = try await TestCluster.start(startDaemon: false)
        do {
            let config = cluster.directory + "/livegated.conf"
            try "cache-max-entities = 5\n".write(toFile: config, atomically: true, encoding: .utf8)
            try await cluster.startDaemon(extraArguments: ["--config", config])
            let token = try await cluster.login()
            for n in 0..<count { try await cluster.put(collection, "\(prefix)\(n)", ["n": .integer(n)], token: token) }
            return cluster
        } catch {
            cluster.stop()
            throw error
        }
    }

    @Test func unobservedEntitiesAreEvictedLeastRecentlyUsedFirst() async throws {
        let cluster = try await clusterBoundedToFive(objects: 12, in: "lru", named: "o")
        defer { cluster.stop() }

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "lru") { client in
            // o0 stays observed the whole time.
            let kept = Queue(try await client.observeObject(collection: "lru", id: "o0").changes)
            _ = try await change(kept, "o0 fresh") { $0.dataStatus == .fresh }
            for n in 1..<12 {
                let observation = try await client.observeObject(collection: "lru", id: "o\(n)")
                _ = try await change(Queue(observation.changes), "o\(n) fresh") { $0.dataStatus == .fresh }
                try await client.invalidate(token: observation.token)
            }
            // Eviction runs beside the stores that ask for it: the bound holds once the last pass ran.
            try await eventually("the cache within its bound of 5") { try cachedIDs(cluster).count <= 5 }
            let ids = try cachedIDs(cluster)
            #expect(ids.contains("o0"), "an observed entity was evicted: \(ids.sorted())")
            #expect(ids.contains("o11") && !ids.contains("o1"), "not least recently used first: \(ids.sorted())")
        }
    }

    /// Fetches that store faster than eviction passes run (40 objects observed at once, bound 5): a pass asked for
    /// while one runs is run after it, so the last stores are evicted too, not left over the bound until the next.
    @Test func aBurstOfFetchesBeyondTheBoundEndsWithinIt() async throws {
        let cluster = try await clusterBoundedToFive(objects: 40, in: "burst", named: "b")
        defer { cluster.stop() }

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "burst") { client in
            try await withThrowingTaskGroup(of: Int64.self) { group in
                for n in 0..<40 {
                    group.addTask {
                        let observation = try await client.observeObject(collection: "burst", id: "b\(n)")
                        _ = try await change(Queue(observation.changes), "b\(n) fresh") { $0.dataStatus == .fresh }
                        return observation.token
                    }
                }
                for try await observed in group { try await client.invalidate(token: observed) }
            }
            try await eventually("the cache within its bound of 5 after the burst") { try cachedIDs(cluster).count <= 5 }
        }
    }
}
