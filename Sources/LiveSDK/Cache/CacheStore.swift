// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// The persistent local cache: one SQLite file (WAL, through a GRDB `DatabasePool`) in the state directory.
///
/// Entities are stored as the cloud last confirmed them; a stored entity is only ever replaced by a
/// higher version, so the cache never goes back in time whatever order answers and events arrive in.
final class CacheStore: Sendable {
    let path: String
    private let pool: DatabasePool

    init(path: String) throws {
        self.path = path
        var configuration = Configuration()
        configuration.label = "livegate.cache"
        pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-entities") { db in
            try db.create(table: "entity") { table in
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.column("data", .text).notNull()
                table.column("createdAt", .text).notNull()
                table.column("updatedAt", .text).notNull()
                table.column("deleted", .boolean).notNull().defaults(to: false)
                table.column("lastAccess", .double).notNull()
                table.primaryKey(["collection", "id"])
            }
        }
        return migrator
    }

    /// The cached entity, if any; records the access for eviction.
    func entity(_ key: EntityKey) async throws(LiveError) -> Entity? {
        do {
            return try await pool.write { db -> Entity? in
                guard
                    let row = try Row.fetchOne(
                        db,
                        sql: "SELECT * FROM entity WHERE collection = ? AND id = ?",
                        arguments: [key.collection, key.id]
                    )
                else { return nil }
                try db.execute(
                    sql: "UPDATE entity SET lastAccess = ? WHERE collection = ? AND id = ?",
                    arguments: [Date().timeIntervalSince1970, key.collection, key.id]
                )
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
        } catch {
            throw LiveError(code: .cacheFailure, message: "reading \(key) from the cache at \(path) failed: \(error)")
        }
    }

    /// Stores `entity` unless the cache already holds the same or a higher version. Returns whether it stored.
    @discardableResult
    func store(_ entity: Entity) async throws(LiveError) -> Bool {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let text = String(decoding: try encoder.encode(entity.data), as: UTF8.self)
            return try await pool.write { db -> Bool in
                try db.execute(
                    sql: """
                        INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted, lastAccess)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT (collection, id) DO UPDATE SET
                            version = excluded.version, data = excluded.data, createdAt = excluded.createdAt,
                            updatedAt = excluded.updatedAt, deleted = excluded.deleted, lastAccess = excluded.lastAccess
                        WHERE excluded.version > entity.version
                        """,
                    arguments: [
                        entity.collection, entity.id, entity.version, text, entity.createdAt, entity.updatedAt,
                        entity.deleted, Date().timeIntervalSince1970,
                    ]
                )
                return db.changesCount > 0
            }
        } catch {
            throw LiveError(code: .cacheFailure, message: "writing \(entity.key) to the cache at \(path) failed: \(error)")
        }
    }

    /// Closes the database (checkpointing the WAL). The store must not be used afterwards.
    func close() throws {
        try pool.close()
    }
}
