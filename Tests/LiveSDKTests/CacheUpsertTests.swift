// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import SeededRandom
import Testing

/// The cache's write of an object (``CacheStore/upsert(_:topicSeq:in:)``, bound through SQLite's C interface)
/// against a model written apart from it: over random, seeded schedules of writes with any text (empty, escapes,
/// characters beyond the BMP), flags and checkpoints, the cache holds for each object the highest version written,
/// exactly as written, answers whether each write is the newest copy, and keeps each object topic's checkpoint at
/// the highest sequence number given for it.
@Suite struct CacheUpsertTests {
    private static let texts = [
        "", "a", "é中😀", "\"quoted\" \\ back/slash", "line\nbreak\t\u{1}", "2026-01-01T00:00:00.000Z", String(repeating: "x", count: 5000),
    ]

    private static func value(_ random: inout SeededGenerator, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0..<(depth < 2 ? 6 : 4), using: &random) {
        case 0: .null
        case 1: .bool(Bool.random(using: &random))
        case 2: .number(JSONNumber(Double(Int.random(in: -1_000_000...1_000_000, using: &random)) / 8)!)
        case 3: .string(texts.randomElement(using: &random)!)
        case 4: .array((0..<Int.random(in: 0...3, using: &random)).map { _ in value(&random, depth: depth + 1) })
        default:
            .object(
                JSONObject(
                    (0..<Int.random(in: 0...3, using: &random)).map { _ in (texts.randomElement(using: &random)!, value(&random, depth: depth + 1)) }
                )
            )
        }
    }

    @Test(arguments: 0..<12) func theCacheHoldsTheHighestVersionWrittenExactly(seed: UInt64) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cache, _) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor())
        defer { try? cache.close() }
        var random = SeededGenerator(seed: 0xC0DE_5000 + seed)
        let ids = ["a", "b", "c", "d", "e"]
        // The model: the entity of the highest version written for each object, and each object topic's highest seq.
        var held: [EntityKey: Entity] = [:]
        var checkpoints: [Topic: Int64] = [:]
        for step in 0..<80 {
            let id = ids.randomElement(using: &random)!
            let entity = Entity(
                collection: "c",
                id: id,
                version: Int64.random(in: 1...20, using: &random),
                data: Self.value(&random),
                createdAt: Self.texts.randomElement(using: &random)!,
                updatedAt: Self.texts.randomElement(using: &random)!,
                deleted: Bool.random(using: &random)
            )
            let topic = Topic.object(entity.key)
            let checkpoint = Bool.random(using: &random) ? (topic: topic, seq: Int64.random(in: 1...100, using: &random)) : nil
            let newest = try cache.storeNow(entity, checkpoint: checkpoint)
            let previous = held[entity.key]
            #expect(newest == ((previous?.version ?? 0) <= entity.version), "seed \(seed) step \(step)")
            if (previous?.version ?? 0) < entity.version { held[entity.key] = entity }
            if let checkpoint { checkpoints[topic] = max(checkpoints[topic] ?? .min, checkpoint.seq) }
            for other in ids {
                let key = EntityKey(collection: "c", id: other)
                #expect(try await cache.entity(key) == held[key], "seed \(seed) step \(step): \(other)")
                #expect(try await cache.checkpoint(.object(key)) == checkpoints[.object(key)], "seed \(seed) step \(step): \(other)'s checkpoint")
            }
        }
    }
}
