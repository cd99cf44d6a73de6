// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import NIOCore
import NIOPosix
import Testing

/// The engine runs on one event loop of the group it is given: a realtime change goes from the socket to
/// the observers' handlers on that loop's thread, without passing through other threads.
@Suite(.serialized) struct EngineLoopTests {
    @Test func realtimeChangesReachObserversOnTheEnginesLoop() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "p1", ["n": 1], token: token)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        try await withEngine(cluster, eventLoopGroup: group) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            let changes = Received<(version: Int64?, onLoop: Bool)>()
            let observation = await engine.object(collection: "posts", id: "p1").observe { change in
                changes.add((change.snapshot?.version, loop.inEventLoop))
            }
            try await changes.wait(for: "v1") { $0.last?.version == 1 }
            for n in 2...3 { try await cluster.put("posts", "p1", ["n": .integer(n)], token: token) }
            try await changes.wait(for: "v3") { $0.last?.version == 3 }
            let realtime = changes.all.filter { ($0.version ?? 0) > 1 }
            #expect(realtime.count == 2 && realtime.allSatisfy(\.onLoop), "every realtime change on the engine's loop: \(realtime)")
            withExtendedLifetime(observation) {}
        }
        try await group.shutdownGracefully()
    }
}
