// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// The writes an older version queued in the cache's own table, moved to the outbox's file at start.
extension CacheStore {
    /// The writes queued in the cache's own `outbox` table, by versions before the outbox had a file of its
    /// own (``OutboxStore``); the engine moves them there at start, then calls ``clearLegacyOutbox(upTo:)``.
    func legacyOutbox() throws(LiveError) -> [OutboxEntry] {
        do {
            return try pool.read { db in try OutboxStore.entries(db) }
        } catch {
            throw monitor.failure(error, doing: "reading the queued writes of the cache", path: path)
        }
    }

    /// Removes the cache's queued writes up to `id` (they are in the outbox now).
    func clearLegacyOutbox(upTo id: Int64) throws(LiveError) {
        do {
            try pool.write { db in try db.execute(sql: "DELETE FROM outbox WHERE id <= ?", arguments: [id]) }
        } catch {
            throw monitor.failure(error, doing: "removing the queued writes of the cache", path: path)
        }
    }
}
