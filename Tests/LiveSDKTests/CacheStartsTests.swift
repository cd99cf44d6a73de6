// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import SeededRandom
import Testing

/// What a burst of new observations starts from (``CacheStore/starts(of:)``: `IN` lists padded to a few lengths,
/// so that the writer caches a few statements, not one per length) is what reading each object and its topic's
/// checkpoint one by one gives, in the keys' order, for lists of every length across the list limit, in two
/// collections, with objects missing from the cache and keys asked for twice. A checkpoint kept apart from an
/// object's row is read by the topic's name built in SQL (``CacheStore/starts(of:)``): this compares it with
/// ``Topic``'s. Read before the table holds any (then the rows are read alone), after, and once the cache is
/// opened again.
@Suite struct CacheStartsTests {
    @Test func paddedListsHaveSevenLengthsAndTheSameIDs() {
        var lengths: Set<Int> = []
        for count in 1...CacheStore.idListLimit {
            let ids = (0..<count).map { "i\($0)" }
            let padded = CacheStore.paddedIDList(ids)
            #expect(Array(padded.prefix(count)) == ids)
            #expect(Set(padded) == Set(ids))
            #expect(padded.count >= count && padded.count <= max(8, 2 * count))
            lengths.insert(padded.count)
        }
        #expect(lengths == [8, 16, 32, 64, 128, 256, 512])
        #expect(CacheStore.paddedIDList([]).isEmpty)
    }

    @Test(arguments: 0..<6) func startsGiveWhatOneByOneReadsGive(seed: UInt64) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("starts-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cache, _) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor())
        defer { try? cache.close() }
        var random = SeededGenerator(seed: 0x5747_0000 + seed)
        let keys = ["a", "b"].flatMap { collection in (0..<700).map { EntityKey(collection: collection, id: "o\($0)") } }
        // Two thirds cached, some with their topic's checkpoint in the row; some checkpoints of objects not cached.
        var events: [(entity: Entity, checkpoint: (topic: Topic, seq: Int64)?)] = []
        for key in keys where Int.random(in: 0..<3, using: &random) > 0 {
            let version = Int64.random(in: 1...9, using: &random)
            let entity = Entity(
                collection: key.collection,
                id: key.id,
                version: version,
                data: ["v": .integer(version)],
                createdAt: "t0",
                updatedAt: "t1"
            )
            let seq = Bool.random(using: &random) ? Int64.random(in: 1...1_000, using: &random) : nil
            events.append((entity, seq.map { (Topic.object(key), $0) }))
        }
        // Fetches that found nothing: their checkpoints in the table. Before the object is stored (its row then has
        // its own checkpoint or none, the table's stays apart: two, beside each other), or instead of a row.
        func fetchesFindingNothing() -> [CacheStore.Fetched] {
            keys.shuffled(using: &random).prefix(100).map { key in
                CacheStore.Fetched(entity: nil, checkpoint: (Topic.object(key), Int64.random(in: 1...1_000, using: &random)))
            }
        }
        // The table apart empty at first: the rows are read alone (``CacheStore/objectCheckpointsApart``).
        let half = events.count / 2
        _ = try cache.storeNow(Array(events[..<half]))
        try await expectStartsAsReadOneByOne(cache, keys: keys, seed: seed, random: &random)
        // Then objects stored after their checkpoints were kept apart, and more kept apart after.
        try await cache.store(fetchesFindingNothing())
        _ = try cache.storeNow(Array(events[half...]))
        try await cache.store(fetchesFindingNothing())
        try await expectStartsAsReadOneByOne(cache, keys: keys, seed: seed, random: &random)
        // Opened again: the checkpoints kept apart are known from the start.
        try cache.close()
        let (reopened, _) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor())
        defer { try? reopened.close() }
        try await expectStartsAsReadOneByOne(reopened, keys: keys, seed: seed, random: &random)
    }

    /// Rounds of ``CacheStore/starts(of:)`` for random lists of `keys`, each start compared with the object and
    /// the topic's checkpoint read one by one.
    private func expectStartsAsReadOneByOne(
        _ cache: CacheStore,
        keys: [EntityKey],
        seed: UInt64,
        random: inout SeededGenerator
    ) async throws {
        for round in 0..<8 {
            let count = Int.random(in: 1...1_200, using: &random)
            var asked = Array(keys.shuffled(using: &random).prefix(count))
            // Now and then keys asked for twice (two waiters of one batch asking for one object).
            if round % 3 == 2 { asked += asked.shuffled(using: &random).prefix(count / 4) }
            let (entities, checkpoints) = try await cache.starts(of: asked)
            #expect(entities.count == asked.count && checkpoints.count == asked.count)
            for (index, key) in asked.enumerated() {
                #expect(entities[index] == (try await cache.entity(key)), "seed \(seed): \(key)")
                #expect(checkpoints[index] == (try await cache.checkpoint(Topic.object(key))), "seed \(seed): \(key)")
            }
        }
    }
}
