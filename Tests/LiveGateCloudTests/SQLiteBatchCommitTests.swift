// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveGateCloud
import LiveJSON
import Synchronization
import Testing

/// A batch of writes commits as one transaction without a savepoint per write; a write that throws must
/// still be rolled back alone (`SQLiteStore.commit`: the batch runs again, each write in a savepoint).
@Suite struct SQLiteBatchCommitTests {
    private struct Refused: Error {}

    /// How many times each write ran, and which objects' events were published.
    private final class Record: Sendable {
        let runs = Mutex<[String: Int]>([:])
        let published = Mutex<[String]>([])
    }

    private static func entity(_ id: String) -> Entity {
        Entity(collection: "t", id: id, version: 1, data: [:], createdAt: "x", updatedAt: "x", deleted: false)
    }

    /// A write that inserts object `id` and logs an event for it, or inserts it and then throws.
    private static func write(_ id: String, throwing: Bool, _ record: Record) -> SQLiteStore.Write {
        { db, events in
            record.runs.withLock { $0[id, default: 0] += 1 }
            try db.execute(
                sql: "INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted) VALUES ('t', ?, 1, '{}', 'x', 'x', 0)",
                arguments: [id]
            )
            if throwing { throw Refused() }
            events.append((Int64(events.count + 1), .entity(entity(id), previous: nil)))
            return .created(entity(id))
        }
    }

    private static func withStore(_ body: (SQLiteStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lg-batch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStore(path: directory + "/cloud.sqlite") { _, _ in }
        defer { try? store.close() }
        try await body(store)
    }

    @Test func aWriteThatThrowsIsRolledBackAloneAndTheOthersCommit() async throws {
        try await Self.withStore { store in
            let record = Record()
            let results = await SQLiteStore.commit(
                [Self.write("a", throwing: false, record), Self.write("b", throwing: true, record), Self.write("c", throwing: false, record)],
                in: store.pool,
                publish: { _, event in
                    if case .entity(let entity, _) = event { record.published.withLock { $0.append(entity.id) } }
                }
            )
            #expect(results.map { (try? $0.get()) != nil } == [true, false, true])
            let stored = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM entity WHERE collection = 't' ORDER BY id") }
            #expect(stored == ["a", "c"])
            #expect(record.published.withLock { $0 } == ["a", "c"])
            // Run without savepoints first, up to "b", which threw; then the whole batch again with them.
            #expect(record.runs.withLock { $0 } == ["a": 2, "b": 2, "c": 1])
        }
    }

    @Test func aBatchWhoseWritesAllSucceedRunsOnce() async throws {
        try await Self.withStore { store in
            let record = Record()
            let results = await SQLiteStore.commit(
                [Self.write("a", throwing: false, record), Self.write("b", throwing: false, record)],
                in: store.pool,
                publish: { _, _ in }
            )
            #expect(results.allSatisfy { (try? $0.get()) != nil })
            #expect(record.runs.withLock { $0 } == ["a": 1, "b": 1])
        }
    }
}
