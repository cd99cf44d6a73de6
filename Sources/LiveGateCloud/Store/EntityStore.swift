// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// Entities and the durable event log, in one SQLite file (WAL).
///
/// Every write appends an event with a global sequence number in the same transaction, and the event is
/// handed to `onCommit` only after the commit, in commit order, so subscribers never see a write that was
/// rolled back and never see two writes out of order.
final class EntityStore: Sendable {
    private let pool: DatabasePool
    private let onCommit: @Sendable (_ seq: Int64, _ entity: Entity) -> Void

    init(path: String, onCommit: @escaping @Sendable (_ seq: Int64, _ entity: Entity) -> Void) throws {
        var configuration = Configuration()
        configuration.label = "livegate-cloud.store"
        pool = try DatabasePool(path: path, configuration: configuration)
        self.onCommit = onCommit
        try Self.migrator.migrate(pool)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "entity") { table in
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.column("data", .text).notNull()
                table.column("createdAt", .text).notNull()
                table.column("updatedAt", .text).notNull()
                table.column("deleted", .boolean).notNull().defaults(to: false)
                table.primaryKey(["collection", "id"])
            }
            try db.create(table: "event") { table in
                table.autoIncrementedPrimaryKey("seq")
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.column("entity", .text).notNull()
            }
        }
        return migrator
    }

    func get(_ key: EntityKey) async throws -> Entity? {
        try await pool.read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM entity WHERE collection = ? AND id = ?",
                arguments: [key.collection, key.id]
            ).map(Self.entity(from:))
        }
    }

    enum PutOutcome: Sendable {
        case created(Entity)
        case replaced(Entity)
        case conflict(currentVersion: Int64)
    }

    /// Creates or replaces the object's data; with `ifVersion`, only if the stored version matches
    /// (0 meaning "does not exist").
    func put(_ key: EntityKey, data: JSONValue, ifVersion: Int64?) async throws -> PutOutcome {
        let dataText = try Self.encode(data)
        let now = Self.timestamp()
        return try await pool.write { [onCommit] db -> PutOutcome in
            let current = try Row.fetchOne(
                db,
                sql: "SELECT * FROM entity WHERE collection = ? AND id = ?",
                arguments: [key.collection, key.id]
            ).map(Self.entity(from:))
            let currentVersion = current.map { $0.deleted ? $0.version : $0.version } ?? 0
            let exists = current.map { !$0.deleted } ?? false
            if let ifVersion, ifVersion != (exists ? currentVersion : 0) {
                return .conflict(currentVersion: exists ? currentVersion : 0)
            }
            let entity = Entity(
                collection: key.collection,
                id: key.id,
                version: currentVersion + 1,
                data: data,
                createdAt: exists ? current!.createdAt : now,
                updatedAt: now
            )
            try db.execute(
                sql: """
                    INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted)
                    VALUES (?, ?, ?, ?, ?, ?, 0)
                    ON CONFLICT (collection, id) DO UPDATE SET version = excluded.version, data = excluded.data,
                        createdAt = excluded.createdAt, updatedAt = excluded.updatedAt, deleted = 0
                    """,
                arguments: [key.collection, key.id, entity.version, dataText, entity.createdAt, entity.updatedAt]
            )
            try db.execute(
                sql: "INSERT INTO event (collection, id, version, entity) VALUES (?, ?, ?, ?)",
                arguments: [key.collection, key.id, entity.version, try Self.encode(entity)]
            )
            let seq = db.lastInsertedRowID
            db.afterNextTransaction(onCommit: { _ in onCommit(seq, entity) })
            return exists ? .replaced(entity) : .created(entity)
        }
    }

    func close() throws { try pool.close() }

    private static func entity(from row: Row) throws -> Entity {
        let text: String = row["data"]
        return Entity(
            collection: row["collection"],
            id: row["id"],
            version: row["version"],
            data: try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)),
            createdAt: row["createdAt"],
            updatedAt: row["updatedAt"],
            deleted: row["deleted"]
        )
    }

    private static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp(_ date: Date = Date()) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
