// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// The engine's field filters (`ObserveOptions.fields`, `LiveCollection.observe(fields:)`): an observer hears
/// only of changes to the fields it names, and the filter is its own. Against the real cloud; an unfiltered
/// observer of the same object or window paces the test (it hears every change, in order).
@Suite(.serialized) struct EngineFieldFilterTests {
    @Test func anObjectObserverHearsOnlyOfTheFieldsItNames() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "p1", ["title": "a", "likes": 1], token: token)
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            let post = engine.object(collection: "posts", id: "p1")
            let all = Received<LiveObjectChange>()
            let titles = Received<LiveObjectChange>()
            let allToken = await post.observe { all.add($0) }
            let titleToken = await post.observe(options: ObserveOptions(fields: ["title"])) { titles.add($0) }
            try await all.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh }
            try await cluster.put("posts", "p1", ["title": "a", "likes": 2], token: token)  // likes only
            try await cluster.put("posts", "p1", ["title": "b", "likes": 2], token: token)  // the title
            try await cluster.put("posts", "p1", ["title": "b", "likes": 3], token: token)  // likes only
            try await cluster.put("posts", "p1", ["likes": 3], token: token)  // the title removed
            try await all.wait(for: "v5") { $0.last?.snapshot?.version == 5 }
            try await titles.wait(for: "v5 (filtered: the title removed)") { $0.last?.snapshot?.version == 5 }
            let heard = titles.all.filter { $0.dataStatus == .fresh }.compactMap { $0.snapshot?.version }
            #expect(heard == [1, 3, 5], "the title observer hears v1, the title's change and its removal: \(heard)")
            #expect(all.all.compactMap { $0.snapshot?.version }.filter { $0 > 1 } == [2, 3, 4, 5], "the other observer hears all")
            withExtendedLifetime((allToken, titleToken)) {}
        }
    }

    @Test func aCollectionObserverHearsOnlyOfTheFieldsItNames() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "a", ["rank": 1, "title": "a", "likes": 0], token: token)
        try await cluster.put("posts", "b", ["rank": 2, "title": "b", "likes": 0], token: token)
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            let posts = engine.collection(CollectionQuery(collection: "posts", sort: QuerySort(field: "rank")))
            let all = Received<LiveCollectionChange>()
            let titles = Received<LiveCollectionChange>()
            let allToken = await posts.observe { all.add($0) }
            let titleToken = await posts.observe(fields: ["title"]) { titles.add($0) }
            try await all.wait(for: "the window") { $0.last?.loadingStatus == .loaded && $0.last?.items.count == 2 }
            try await titles.wait(for: "the window (filtered)") { $0.last?.loadingStatus == .loaded }
            let before = titles.all.count

            try await cluster.put("posts", "b", ["rank": 2, "title": "b", "likes": 7], token: token)  // likes only
            try await cluster.put("posts", "a", ["rank": 1, "title": "A", "likes": 0], token: token)  // a title
            try await cluster.put("posts", "c", ["rank": 3, "title": "c", "likes": 0], token: token)  // an insertion
            try await all.wait(for: "c") { $0.last?.items.map(\.id) == ["a", "b", "c"] }
            try await titles.wait(for: "c (filtered)") { $0.last?.items.map(\.id) == ["a", "b", "c"] }
            let heard = Array(titles.all[before...])
            #expect(heard.count == 2, "the likes change is not heard: \(heard.map(\.changes))")
            #expect(heard.first?.changes.modifications.map { [$0.old, $0.new] } == [[0, 0]], "a's title")
            #expect(heard.last?.changes.insertions == [2] && heard.last?.items.map(\.id) == ["a", "b", "c"])
            #expect(all.all.contains { $0.changes.modifications.map(\.old) == [1] }, "the other observer hears b's likes")
            withExtendedLifetime((allToken, titleToken)) {}
        }
    }
}
