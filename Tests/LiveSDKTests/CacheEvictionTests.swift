// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import SeededRandom
import Testing

@Suite struct CacheEvictionTests {
    private static func entity(_ id: String, version: Int64) -> Entity {
        Entity(collection: "c", id: id, version: version, data: ["v": .integer(version)], createdAt: "t0", updatedAt: "t\(version)")
    }

    /// Eviction takes the least recently used first: recency is the last time an object was stored, read alone
    /// (`entity(_:)`) or its observation activated (`touch(_:)`); reading an observation's start (`starts(of:)`)
    /// is not a use by itself.
    /// Random operations against a model that keeps each object's last use in order; every eviction must take
    /// exactly the model's oldest unprotected objects.
    @Test func evictionTakesTheLeastRecentlyStoredOrReadFirst() async throws {
        let (cache, directory) = try TemporaryCache.open()
        defer { TemporaryCache.discard(cache, directory) }

        var random = SeededGenerator(seed: 20_261_129)
        // The model: a use number per object held (the objects read by one start share one: one time).
        var lastUse: [String: Int] = [:]
        var uses = 0
        var versions: [String: Int64] = [:]
        let ids = (0..<8).map { "o\($0)" }
        for step in 0..<400 {
            let id = ids.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let version = (versions[id] ?? 0) + 1
                versions[id] = version
                #expect(try cache.storeNow(Self.entity(id, version: version)))
                uses += 1
                lastUse[id] = uses
            case 4..<6:
                let read = try await cache.entity(EntityKey(collection: "c", id: id))
                #expect(read?.version == (lastUse[id] == nil ? nil : versions[id]))
                uses += 1
                if lastUse[id] != nil { lastUse[id] = uses }
            case 6..<9:
                let keys = Array(Set((0..<Int.random(in: 1...4, using: &random)).map { _ in ids.randomElement(using: &random)! }))
                let read = try await cache.starts(of: keys.map { EntityKey(collection: "c", id: $0) })
                #expect(Set(read.entities.compactMap { $0?.id }) == Set(keys.filter { lastUse[$0] != nil }))
                #expect(zip(keys, read.entities).allSatisfy { key, entity in entity.map { $0.id == key } ?? true })
                // Mostly activated after (a use); now and then released first (none).
                if Int.random(in: 0..<4, using: &random) > 0 {
                    try await cache.touch(keys.map { EntityKey(collection: "c", id: $0) })
                    uses += 1
                    for key in keys where lastUse[key] != nil { lastUse[key] = uses }
                }
            default:
                let protected = Set(ids.filter { _ in Int.random(in: 0..<4, using: &random) == 0 })
                let limit = Int.random(in: 0...lastUse.count, using: &random)
                let candidates = lastUse.filter { !protected.contains($0.key) }
                let excess = min(max(0, lastUse.count - limit), candidates.count)
                let (evicted, remaining) = try await cache.evict(
                    keepingAtMost: limit,
                    protecting: Set(protected.map { EntityKey(collection: "c", id: $0) })
                )
                #expect(evicted == excess && remaining == lastUse.count - excess, "step \(step)")
                // Which went: each object read back (a start's read, not a use), then those gone checked to be the
                // oldest (ties, from one start, may go either way).
                var gone: [String] = []
                for key in lastUse.keys.sorted() {
                    let entities = try await cache.starts(of: [EntityKey(collection: "c", id: key)]).entities
                    if entities == [nil] { gone.append(key) }
                }
                #expect(gone.count == excess && gone.allSatisfy { !protected.contains($0) }, "step \(step): \(gone)")
                let newestGone = gone.compactMap { candidates[$0] }.max() ?? .min
                let oldestKept = candidates.filter { !gone.contains($0.key) }.map(\.value).min() ?? .max
                #expect(newestGone <= oldestKept, "step \(step): evicted \(gone) of \(candidates)")
                for key in gone { lastUse[key] = nil }
            }
        }
    }

    /// A checkpoint of an object's topic kept apart from its row (in the `checkpoint` table, as versions before
    /// `v9-entity-topic-seq` kept every one) goes with the row when the object is evicted: left alone, it said
    /// the cache held every event up to it with no object, so a later start resumed from it, heard no event since
    /// and told the object did not exist.
    @Test func anEvictedObjectLeavesNoCheckpointBehind() async throws {
        let (cache, directory) = try TemporaryCache.open()
        defer { TemporaryCache.discard(cache, directory) }

        let a = EntityKey(collection: "c", id: "a")
        let b = EntityKey(collection: "c", id: "b")
        // Checkpoints in the table beside the rows, as an earlier version wrote every one: here each object's read
        // found nothing (the table's checkpoint), then the object was written (a row, no checkpoint of its own).
        try await cache.store([
            CacheStore.Fetched(entity: nil, checkpoint: (.object(a), 40)),
            CacheStore.Fetched(entity: nil, checkpoint: (.object(b), 41)),
        ])
        _ = try cache.storeNow([(Self.entity("x", version: 1), (.collection("c"), 42))])
        #expect(try cache.storeNow(Self.entity("a", version: 4)))
        #expect(try cache.storeNow(Self.entity("b", version: 2)))
        #expect(try await cache.starts(of: [a]).checkpoints == [40])
        let (evicted, _) = try await cache.evict(keepingAtMost: 2, protecting: [b, EntityKey(collection: "c", id: "x")])
        #expect(evicted == 1)
        let read = try await cache.starts(of: [a, b])
        #expect(read.entities[0] == nil && read.entities[1]?.version == 2)
        #expect(read.checkpoints == [nil, 41], "the evicted object's went with it; the kept one's stays")
        #expect(try await cache.checkpoint(.object(a)) == nil)
        #expect(try await cache.checkpoint(.collection("c")) == 42, "another topic's is not the object's")
    }

    /// A topic replaying what was missed brings an object's older event after the cache held a newer copy (from a
    /// write's answer, or another topic). Eviction forgot that newer copy, and the older one was then taken for
    /// the newest and shown in a window (checker seed 4268631748165352, with the cache bounded to 38 objects).
    /// The cache now remembers an evicted object's version until it stores the object again.
    @Test func anEvictedObjectsVersionStillRefusesOlderEvents() async throws {
        let (cache, directory) = try TemporaryCache.open()
        defer { TemporaryCache.discard(cache, directory) }

        #expect(try cache.storeNow(Self.entity("a", version: 12)))
        #expect(try cache.storeNow(Self.entity("b", version: 3)))
        let (evicted, remaining) = try await cache.evict(keepingAtMost: 1, protecting: [EntityKey(collection: "c", id: "b")])
        #expect(evicted == 1 && remaining == 1)
        #expect(try await cache.entity(EntityKey(collection: "c", id: "a")) == nil)

        // Older than the evicted copy: not the newest, and not stored.
        #expect(try cache.storeNow(Self.entity("a", version: 11)) == false)
        #expect(try cache.storeNow([(Self.entity("a", version: 10), nil)]) == [false])
        #expect(try await cache.entity(EntityKey(collection: "c", id: "a")) == nil)
        // Nor by the other ways in: a write's answer, a fetch, a query's result, a page of a result index.
        #expect(try await cache.store(Self.entity("a", version: 11)) == false)
        try await cache.store([CacheStore.Fetched(entity: Self.entity("a", version: 11), checkpoint: nil)])
        try await cache.storeQueryResult(
            "w",
            CacheStore.QueryResult(ids: ["a"], hasNext: false, hasPrevious: false, count: 1, seq: 1),
            entities: [Self.entity("a", version: 11)]
        )
        try await cache.appendResultPage(
            "q",
            CollectionQuery(collection: "c"),
            after: nil,
            [Self.entity("a", version: 11)],
            complete: true,
            count: 1
        )
        #expect(try await cache.entity(EntityKey(collection: "c", id: "a")) == nil)
        // The same version or a later one is stored, and from then the row itself is what counts.
        #expect(try cache.storeNow(Self.entity("a", version: 12)))
        #expect(try await cache.entity(EntityKey(collection: "c", id: "a"))?.version == 12)
        #expect(try cache.storeNow(Self.entity("a", version: 11)) == false)
        #expect(try cache.storeNow(Self.entity("a", version: 13)))
        // An object never evicted is unaffected.
        #expect(try cache.storeNow(Self.entity("b", version: 2)) == false)
        #expect(try cache.storeNow(Self.entity("b", version: 4)))
    }
}

extension CacheEvictionTests {
    /// A restarted engine resumes a collection topic from its checkpoint, and the replay can bring an evicted
    /// object's older event then too: the evicted versions outlive the process.
    @Test func anEvictedObjectsVersionOutlivesAReopen() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/cache.sqlite"
        let a = EntityKey(collection: "c", id: "a")
        let b = EntityKey(collection: "c", id: "b")

        var (cache, _) = try CacheStore.open(path: path, monitor: StorageMonitor())
        #expect(try cache.storeNow(Self.entity("a", version: 12)))
        #expect(try cache.storeNow(Self.entity("b", version: 5)))
        #expect(try await cache.evict(keepingAtMost: 1, protecting: [b]).evicted == 1)
        try cache.close()

        (cache, _) = try CacheStore.open(path: path, monitor: StorageMonitor())
        #expect(try cache.storeNow(Self.entity("a", version: 11)) == false)
        #expect(try await cache.entity(a) == nil)
        // Stored again: forgotten, on disk too, and the row is what counts from then (b evicted meanwhile).
        #expect(try cache.storeNow(Self.entity("a", version: 12)))
        #expect(try await cache.evict(keepingAtMost: 1, protecting: [a]).evicted == 1)
        try cache.close()

        (cache, _) = try CacheStore.open(path: path, monitor: StorageMonitor())
        defer { try? cache.close() }
        #expect(try cache.storeNow(Self.entity("b", version: 4)) == false)
        #expect(try cache.storeNow(Self.entity("a", version: 11)) == false)
        #expect(try await cache.entity(a)?.version == 12)
        #expect(try cache.storeNow(Self.entity("b", version: 6)))
    }
}
