// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// The size bound: how many objects the cache holds, and evicting the least recently used unobserved ones.
extension CacheStore {
    /// How many objects the cache holds (a read: beside the writer, not waiting for it).
    func entityCount() async throws(LiveError) -> Int {
        do {
            return try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entity") ?? 0 }
        } catch {
            throw monitor.failure(error, doing: "counting the objects in the cache", path: path)
        }
    }

    /// Deletes entities beyond `keepingAtMost`, least recently used first, never one of `protecting`, with any
    /// checkpoint of their topics kept apart from their rows: a checkpoint with no row says the object did not
    /// exist as of it, which an evicted one did (one kept in the `checkpoint` table by a version before
    /// `v9-entity-topic-seq` outlived its row, and a later start resumed from it, found no event since and told
    /// the object did not exist). Returns how many it deleted, and how many the cache holds after.
    package func evict(keepingAtMost limit: Int, protecting protected: Set<EntityKey>) async throws(LiveError) -> (evicted: Int, remaining: Int) {
        do {
            return try await pool.write { db -> (evicted: Int, remaining: Int) in
                let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entity") ?? 0
                let excess = count - limit
                guard excess > 0 else { return (0, count) }
                let candidates = try Row.fetchAll(
                    db,
                    sql: "SELECT collection, id, version FROM entity ORDER BY lastAccess LIMIT ?",
                    arguments: [excess + protected.count]
                )
                var deleted: [EntityKey: Int64] = [:]
                for row in candidates where deleted.count < excess {
                    let key = EntityKey(collection: row["collection"], id: row["id"])
                    if protected.contains(key) { continue }
                    try db.execute(sql: "DELETE FROM entity WHERE collection = ? AND id = ?", arguments: [key.collection, key.id])
                    try db.execute(sql: "DELETE FROM checkpoint WHERE topic = ?", arguments: [Topic.object(key).description])
                    deleted[key] = row["version"]
                }
                let full = self.evictedVersions.withLock { versions in
                    let full = versions.count + deleted.count > Self.evictedVersionsLimit
                    if full { versions.removeAll() }
                    versions.merge(deleted) { max($0, $1) }
                    return full
                }
                if full { try db.execute(sql: "DELETE FROM evictedVersion") }
                let remember = try db.cachedStatement(
                    sql: """
                        INSERT INTO evictedVersion (collection, id, version) VALUES (?, ?, ?)
                        ON CONFLICT (collection, id) DO UPDATE SET version = max(version, excluded.version)
                        """
                )
                for (key, version) in deleted { try remember.execute(arguments: [key.collection, key.id, version]) }
                return (deleted.count, count - deleted.count)
            }
        } catch {
            throw monitor.failure(error, doing: "evicting from the cache", path: path)
        }
    }
}
