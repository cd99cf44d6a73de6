// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import SeededRandom
import Testing

/// The engine stores a realtime read's events in one transaction, and an object the read brings several times is
/// written once (``CacheStore/storeNow(_:)``). Checked against the cache storing the same events one at a time
/// (``CacheStore/storeNow(_:checkpoint:)``, each its own transaction) over random schedules of batches and
/// evictions: the same answers and objects after every step, and the same checkpoints until an eviction. The
/// checkpoints are checked against a model too: never above the highest sequence number given for the topic,
/// and never below the highest given since its object was last evicted (an object topic's checkpoint is kept
/// in the object's row, and goes with it).
@Suite struct BatchStoreTests {
    private static let ids = ["a", "b", "c", "d"]
    private static let topics: [Topic] = ids.map { .object(EntityKey(collection: "c", id: $0)) } + [.collection("c")]

    private static func entity(_ id: String, version: Int64) -> Entity {
        Entity(
            collection: "c",
            id: id,
            version: version,
            data: ["id": .string(id), "v": .integer(version)],
            createdAt: "t0",
            updatedAt: "t\(version)"
        )
    }

    @Test func aHotObjectInABatchIsWrittenOnceWithTheAnswersOfOneAtATime() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cache, _) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor())
        defer { try? cache.close() }

        #expect(try cache.storeNow(Self.entity("a", version: 5)))
        let answers = try cache.storeNow([
            (Self.entity("a", version: 6), nil), (Self.entity("a", version: 4), nil), (Self.entity("a", version: 8), (Self.topics[0], 3)),
            (Self.entity("b", version: 1), nil), (Self.entity("a", version: 8), (Self.topics[0], 2)), (Self.entity("a", version: 7), nil),
        ])
        #expect(answers == [true, false, true, true, true, false])
        #expect(try await cache.entity(EntityKey(collection: "c", id: "a")) == Self.entity("a", version: 8))
        #expect(try await cache.checkpoint(Self.topics[0]) == 3)
    }

    @Test(arguments: 0..<40) func batchesGiveWhatOneAtATimeGives(seed: UInt64) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (batched, _) = try CacheStore.open(path: directory + "/batched.sqlite", monitor: StorageMonitor())
        let (single, _) = try CacheStore.open(path: directory + "/single.sqlite", monitor: StorageMonitor())
        defer {
            try? batched.close()
            try? single.close()
        }
        var random = SeededGenerator(seed: 0xBA7C_4000 + seed)
        // The model: the highest sequence number given for each topic, ever and since its object's last eviction.
        var given: [Topic: Int64] = [:]
        var sinceEviction: [Topic: Int64] = [:]
        var evicted = false
        for step in 0..<60 {
            if Int.random(in: 0..<6, using: &random) == 0 {
                // Evict one object (chosen, so that both caches evict the same one whatever their access times).
                let victim = Self.ids.randomElement(using: &random)!
                let others = Set(Self.ids.filter { $0 != victim }.map { EntityKey(collection: "c", id: $0) })
                let a = try await batched.evict(keepingAtMost: 0, protecting: others)
                let b = try await single.evict(keepingAtMost: 0, protecting: others)
                #expect(a == b, "seed \(seed) step \(step): eviction")
                if a.evicted > 0 {
                    sinceEviction[.object(EntityKey(collection: "c", id: victim))] = nil
                    evicted = true
                }
            } else {
                let count = Int.random(in: 1...12, using: &random)
                let events: [(entity: Entity, checkpoint: (topic: Topic, seq: Int64)?)] = (0..<count).map { _ in
                    let id = Self.ids.randomElement(using: &random)!
                    // An event of the object's own topic, of its collection's, or with no checkpoint.
                    let topic: Topic? = [nil, .object(EntityKey(collection: "c", id: id)), .collection("c")].randomElement(using: &random)!
                    let checkpoint = topic.map { (topic: $0, seq: Int64.random(in: 1...50, using: &random)) }
                    return (Self.entity(id, version: Int64.random(in: 1...15, using: &random)), checkpoint)
                }
                let answers = try batched.storeNow(events)
                let expected = try events.map { try single.storeNow($0.entity, checkpoint: $0.checkpoint) }
                #expect(answers == expected, "seed \(seed) step \(step): \(events.map { "\($0.entity.id)@\($0.entity.version)" })")
                for case let (_, (topic, seq)?) in events {
                    given[topic] = max(given[topic] ?? .min, seq)
                    sinceEviction[topic] = max(sinceEviction[topic] ?? .min, seq)
                }
            }
            for id in Self.ids {
                let key = EntityKey(collection: "c", id: id)
                #expect(try await batched.entity(key) == single.entity(key), "seed \(seed) step \(step): \(id)")
            }
            for topic in Self.topics {
                let checkpoint = try await batched.checkpoint(topic)
                let one = try await single.checkpoint(topic)
                // After an eviction one cache may hold a checkpoint the other held in the evicted row.
                if !evicted { #expect(one == checkpoint, "seed \(seed) step \(step): \(topic)") }
                #expect((one ?? .min) <= (given[topic] ?? .min), "seed \(seed) step \(step): \(topic) beyond what was given, one at a time")
                #expect((one ?? .min) >= (sinceEviction[topic] ?? .min), "seed \(seed) step \(step): \(topic) moved back, one at a time")
                #expect((checkpoint ?? .min) <= (given[topic] ?? .min), "seed \(seed) step \(step): \(topic) beyond what was given")
                #expect((checkpoint ?? .min) >= (sinceEviction[topic] ?? .min), "seed \(seed) step \(step): \(topic) moved back")
            }
        }
    }
}
