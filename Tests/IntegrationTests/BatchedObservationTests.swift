// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// Many observations handed to the engine in one call (`LiveClient.observe(_:)`, what the daemon does with a
/// burst of new topics): each starts from the cache as one observation alone would, a key twice in a batch is
/// one observation with two observers, and each token ends only its own.
@Suite(.serialized) struct BatchedObservationTests {
    @Test func aBatchStartsEachFromTheCacheAndItsTokensEndOnlyTheirOwn() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("notes", "a", ["v": 1], token: token)
        try await cluster.put("notes", "b", ["v": 1], token: token)
        // A first engine caches a and b.
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            for id in ["a", "b"] {
                let seen = Received<LiveObjectChange>()
                let observation = await engine.object(collection: "notes", id: id).observe { seen.add($0) }
                try await seen.wait(for: "\(id) fresh") { $0.last?.dataStatus == .fresh }
                observation.invalidate()
            }
        }
        // The next one, on the same cache: one batch with a twice, b, and c, which does not exist.
        try await withEngine(cluster) { engine in
            let ids = ["a", "a", "b", "c"]
            let seen = ids.map { _ in Received<LiveObjectChange>() }
            let tokens = await engine.observe(
                ids.enumerated().map { index, id in
                    ObservationRequest(key: EntityKey(collection: "notes", id: id)) { seen[index].add($0) }
                }
            )
            #expect(tokens.count == ids.count)
            for index in 0..<3 {
                try await seen[index].wait(for: "\(ids[index]) fresh") { $0.last?.dataStatus == .fresh }
                let first = seen[index].all.first
                #expect(first?.dataStatus == .local && first?.snapshot?.version == 1, "the cached copy first: \(seen[index].all)")
            }
            try await seen[3].wait(for: "c known not to exist") { $0.last?.dataStatus == .notExist && $0.last?.loadingStatus == .loaded }
            #expect(!seen[3].all.contains { $0.snapshot != nil })

            // The second token of a ends; the first hears the next change, the second does not.
            tokens[1].invalidate()
            let heardBefore = seen[1].all.count
            try await cluster.put("notes", "a", ["v": 2], token: token)
            try await seen[0].wait(for: "a v2") { $0.last?.snapshot?.version == 2 }
            #expect(seen[1].all.count == heardBefore, "an ended token hears nothing: \(seen[1].all)")
            #expect(!seen[2].all.contains { $0.snapshot?.version == 2 }, "b is another object")
            withExtendedLifetime(tokens) {}
        }
    }
}
