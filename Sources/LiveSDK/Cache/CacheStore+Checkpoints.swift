// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// Checkpoints: up to which event of a topic the cache holds everything, where a restarted engine resumes.
extension CacheStore {
    /// The sequence number up to which the cache holds every event of `topic`, if it was recorded.
    package func checkpoint(_ topic: Topic) async throws(LiveError) -> Int64? {
        do {
            return try await pool.read { db in
                let table = try Int64.fetchOne(db, sql: "SELECT seq FROM checkpoint WHERE topic = ?", arguments: [topic.description])
                guard case .object(let key) = topic else { return table }
                let row = try Int64.fetchOne(
                    db,
                    sql: "SELECT topicSeq FROM entity WHERE collection = ? AND id = ?",
                    arguments: [key.collection, key.id]
                )
                return Self.later(row, table)
            }
        } catch {
            throw monitor.failure(error, doing: "reading a checkpoint from the cache", path: path)
        }
    }

    /// Records that the cache holds every event of `topic` up to `seq` (never moves back). An object topic's
    /// checkpoint goes in the object's row when the cache holds it (``upsert(_:topicSeq:in:)``
    /// writes it with the object itself); any other, or one of an object not held, in the `checkpoint` table.
    func saveCheckpoint(_ topic: Topic, _ seq: Int64, in db: Database) throws {
        if case .object(let key) = topic {
            // Cached (prepared once) statements: a realtime event of an object topic brings a checkpoint, and this
            // runs for those whose object was not written with it (the same version heard on its collection's topic
            // first). The row is written even when its checkpoint is later: `changesCount` then says it is there.
            try db.cachedStatement(
                sql: "UPDATE entity SET topicSeq = CASE WHEN topicSeq >= ?1 THEN topicSeq ELSE ?1 END WHERE collection = ?2 AND id = ?3"
            ).execute(arguments: [seq, key.collection, key.id])
            if db.changesCount > 0 { return }
            // Before the row can be committed: a read that finds the flag unset after its snapshot was taken
            // knows that snapshot holds no such row (``starts(of:)``).
            objectCheckpointsApart.store(true, ordering: .sequentiallyConsistent)
        }
        try db.cachedStatement(
            sql:
                "INSERT INTO checkpoint (topic, seq) VALUES (?, ?) ON CONFLICT (topic) DO UPDATE SET seq = excluded.seq WHERE excluded.seq > checkpoint.seq"
        ).execute(arguments: [topic.description, seq])
    }
}
