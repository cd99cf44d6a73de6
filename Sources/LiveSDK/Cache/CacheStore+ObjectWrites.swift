// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// Storing objects: only ever a higher version, with the checkpoint of the topic that brought it.
extension CacheStore {
    /// Stores `entity` unless the cache already holds the same or a higher version. Returns whether it stored.
    /// With `checkpoint`, also records in the same transaction that the cache holds every event of that
    /// topic up to that sequence number (where a restarted engine resumes from).
    @discardableResult
    package func store(_ entity: Entity, checkpoint: (topic: Topic, seq: Int64)? = nil) async throws(LiveError) -> Bool {
        do {
            let stored = try await pool.write { db in try self.store(entity, checkpoint: checkpoint, in: db) }
            monitor.success(path)
            return stored
        } catch {
            throw monitor.failure(error, doing: "writing \(entity.key) to the cache", path: path)
        }
    }

    /// What a fetch brings to store: the entity (none when the cloud never had it) and the checkpoint of its
    /// object topic as of the fetch.
    package struct Fetched: Sendable {
        var entity: Entity?
        var checkpoint: (topic: Topic, seq: Int64)?

        package init(entity: Entity? = nil, checkpoint: (topic: Topic, seq: Int64)? = nil) {
            self.entity = entity
            self.checkpoint = checkpoint
        }
    }

    /// Stores many fetches' outcomes in one transaction (as ``store(_:checkpoint:)`` does each, and
    /// ``saveCheckpoint(_:_:in:)`` for a fetch that found nothing): one commit for a batch of fetches.
    package func store(_ fetched: [Fetched]) async throws(LiveError) {
        guard !fetched.isEmpty else { return }
        do {
            try await pool.write { db in
                for item in fetched {
                    if let entity = item.entity {
                        _ = try self.store(entity, checkpoint: item.checkpoint, in: db)
                    } else if let checkpoint = item.checkpoint {
                        try self.saveCheckpoint(checkpoint.topic, checkpoint.seq, in: db)
                    }
                }
            }
            monitor.success(path)
        } catch {
            throw monitor.failure(error, doing: "writing \(fetched.count) fetched objects to the cache", path: path)
        }
    }

    /// ``store(_:checkpoint:)`` on the calling thread, which waits for the write (and for any write in
    /// progress): for the engine's realtime events, which it handles on a loop of its own (``EngineLoop``),
    /// where handing each write to the database's queue and back cost two thread switches per event.
    /// Returns whether `entity` is the newest copy the cache knows (stored now, or the same version held
    /// already); `false` when the cache holds a newer one.
    @discardableResult
    package func storeNow(_ entity: Entity, checkpoint: (topic: Topic, seq: Int64)? = nil) throws(LiveError) -> Bool {
        do {
            let current = try writeNow { db in try self.storeNewest(entity, checkpoint: checkpoint, in: db) }
            monitor.success(path)
            return current
        } catch {
            throw monitor.failure(error, doing: "writing \(entity.key) to the cache", path: path)
        }
    }

    /// ``storeNow(_:checkpoint:)`` for many events in one transaction, in order: whether each entity is the
    /// newest copy the cache knows once the ones before it are stored.
    ///
    /// An object the batch brings several times (a hot object: many events read at once) is written once, at
    /// the newest version the batch leaves in the cache; the answers for its earlier events are worked out as
    /// the writes one by one would give them (``BatchStoreOutcome``). Nothing reads between the writes of one
    /// transaction, so what it commits is the same. Checkpoints never move back, so each topic's highest is the
    /// one saved (an object's own topic's in the row written, if one is).
    package func storeNow(_ entities: [(entity: Entity, checkpoint: (topic: Topic, seq: Int64)?)]) throws(LiveError) -> [Bool] {
        guard !entities.isEmpty else { return [] }
        do {
            let current = try writeNow { db in
                var current = [Bool](repeating: false, count: entities.count)
                var occurrences: [EntityKey: [Int]] = [:]
                occurrences.reserveCapacity(entities.count)
                for (index, item) in entities.enumerated() { occurrences[item.entity.key, default: []].append(index) }
                var otherCheckpoints: [Topic: Int64] = [:]
                for indices in occurrences.values {
                    let first = entities[indices[0]].entity
                    // The highest checkpoint of the object's own topic among its events; any other topic's apart.
                    var ownCheckpoint: (topic: Topic, seq: Int64)?
                    for index in indices {
                        guard let checkpoint = entities[index].checkpoint else { continue }
                        if checkpoint.topic == .object(first.key) {
                            ownCheckpoint = (checkpoint.topic, max(ownCheckpoint?.seq ?? .min, checkpoint.seq))
                        } else {
                            otherCheckpoints[checkpoint.topic] = max(otherCheckpoints[checkpoint.topic] ?? .min, checkpoint.seq)
                        }
                    }
                    guard indices.count > 1 else {
                        current[indices[0]] = try self.storeNewest(first, checkpoint: ownCheckpoint, in: db)
                        continue
                    }
                    let outcome = BatchStoreOutcome(
                        versions: indices.map { entities[$0].entity.version },
                        held: try Self.heldVersion(of: first, in: db),
                        evicted: self.evictedVersions.withLock { $0[first.key] }
                    )
                    for (index, newest) in zip(indices, outcome.newest) { current[index] = newest }
                    if let written = outcome.written {
                        _ = try self.store(entities[indices[written]].entity, checkpoint: ownCheckpoint, in: db)
                    } else if let ownCheckpoint {
                        try self.saveCheckpoint(ownCheckpoint.topic, ownCheckpoint.seq, in: db)
                    }
                }
                for (topic, seq) in otherCheckpoints { try self.saveCheckpoint(topic, seq, in: db) }
                return current
            }
            monitor.success(path)
            return current
        } catch {
            throw monitor.failure(error, doing: "writing \(entities.count) objects to the cache", path: path)
        }
    }

    /// `updates` in one write transaction, begun and committed with statements prepared once: GRDB's `write` prepares
    /// its `BEGIN` and `COMMIT` again for every transaction (parsed, authorized, compiled), and the engine commits once
    /// per read of the realtime link, once per event when events come one at a time. A failure rolls back what is
    /// left of the transaction (SQLite may have rolled it back already) and throws.
    private func writeNow<T>(_ updates: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            do {
                let result = try updates(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return result
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
    }

    /// Writes `entity` in `db` unless it holds the same or a higher version, or evicted a higher one; returns
    /// whether `entity` is then the newest copy known (stored now, or the same version held already).
    private func storeNewest(_ entity: Entity, checkpoint: (topic: Topic, seq: Int64)?, in db: Database) throws -> Bool {
        if try store(entity, checkpoint: checkpoint, in: db) { return true }
        if let evicted = evictedVersions.withLock({ $0[entity.key] }), entity.version < evicted { return false }
        // Not stored: the cache holds this version already (the same write heard on another topic), or a newer one.
        return try (Self.heldVersion(of: entity, in: db) ?? 0) <= entity.version
    }

    /// The version of `entity`'s object the cache holds, if any.
    private static func heldVersion(of entity: Entity, in db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT version FROM entity WHERE collection = ? AND id = ?"),
            arguments: [entity.collection, entity.id]
        )
    }

    /// ``upsert(_:topicSeq:in:)`` with the checkpoint in the object's row when it is of the object's own topic and
    /// the object is written; otherwise saved apart (``saveCheckpoint(_:_:in:)``). Returns whether it wrote.
    private func store(_ entity: Entity, checkpoint: (topic: Topic, seq: Int64)?, in db: Database) throws -> Bool {
        let own = checkpoint.flatMap { $0.topic == .object(entity.key) ? $0.seq : nil }
        let stored = try upsert(entity, topicSeq: own, in: db)
        if let checkpoint, !(stored && own != nil) { try self.saveCheckpoint(checkpoint.topic, checkpoint.seq, in: db) }
        return stored
    }

    /// Every store of an entity goes through here: the static ``upsert(_:in:)`` unless the cache evicted a higher
    /// version of it (see `evictedVersions`). Returns whether it wrote.
    func upsert(_ entity: Entity, topicSeq: Int64? = nil, in db: Database) throws -> Bool {
        let evicted = evictedVersions.withLock { $0[entity.key] }
        if let evicted, entity.version < evicted { return false }
        guard try Self.upsert(entity, topicSeq: topicSeq, in: db) else { return false }
        // The cache holds the object again, at that version or later: it remembers the version itself.
        if evicted != nil {
            try db.execute(sql: "DELETE FROM evictedVersion WHERE collection = ? AND id = ?", arguments: [entity.collection, entity.id])
            evictedVersions.withLock { $0[entity.key] = nil }
        }
        return true
    }

    /// Writes `entity` in `db` unless it holds the same or a higher version; returns whether it wrote. With
    /// `topicSeq`, the row records that the cache holds every event of the object's topic up to it (its
    /// checkpoint, which never moves back; an object written without one keeps the one it had).
    ///
    /// This runs for every realtime event, so its statement is prepared once (GRDB's cache) and bound and stepped
    /// here through SQLite's C interface, without GRDB's boxing of each value (Benchmarks.md, the cache's write of
    /// spread events). What GRDB's execution adds is not needed here: the
    /// statement touches one table that no observer watches (the checkpointer's observes no change; the commit
    /// that follows is GRDB's own, so its observers are told), and a failure throws the same `DatabaseError` (the
    /// statement reset, reusable: SQLite's reset after a failed step puts it back to its start).
    static func upsert(_ entity: Entity, topicSeq: Int64? = nil, in db: Database) throws -> Bool {
        // The text `JSONEncoder` with `.sortedKeys` writes, written directly.
        var writer = JSONWriter(escapesSlashes: true)
        try writer.write(entity.data)
        let statement = try db.cachedStatement(sql: upsertSQL)
        let raw = statement.sqliteStatement
        // Bound with SQLITE_TRANSIENT: SQLite copies each text at once, so no pointer outlives its scope.
        sqlite3_reset(raw)
        try bind(entity.collection, at: 1, of: statement)
        try bind(entity.id, at: 2, of: statement)
        try check(sqlite3_bind_int64(raw, 3, entity.version), binding: 3)
        try writer.bytes.withUnsafeBufferPointer { bytes in
            // A zero-length text still needs a non-null pointer (null binds NULL, which the column refuses).
            let code = bytes.withMemoryRebound(to: CChar.self) { chars in
                sqlite3_bind_text(raw, 4, chars.baseAddress ?? emptyText, CInt(chars.count), sqliteTransient)
            }
            try check(code, binding: 4)
        }
        try bind(entity.createdAt, at: 5, of: statement)
        try bind(entity.updatedAt, at: 6, of: statement)
        try check(sqlite3_bind_int64(raw, 7, entity.deleted ? 1 : 0), binding: 7)
        try check(sqlite3_bind_double(raw, 8, Date().timeIntervalSince1970), binding: 8)
        if let topicSeq {
            try check(sqlite3_bind_int64(raw, 9, topicSeq), binding: 9)
        } else {
            try check(sqlite3_bind_null(raw, 9), binding: 9)
        }
        var code = sqlite3_step(raw)
        while code == SQLITE_ROW { code = sqlite3_step(raw) }
        guard code == SQLITE_DONE else {
            let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
            sqlite3_reset(raw)
            sqlite3_clear_bindings(raw)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: upsertSQL)
        }
        let wrote = db.changesCount > 0
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        return wrote
    }

    /// ``upsert(_:topicSeq:in:)``'s statement: the row unless the cache holds the same or a higher version.
    static let upsertSQL = """
        INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted, lastAccess, topicSeq)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (collection, id) DO UPDATE SET
            version = excluded.version, data = excluded.data, createdAt = excluded.createdAt,
            updatedAt = excluded.updatedAt, deleted = excluded.deleted, lastAccess = excluded.lastAccess,
            topicSeq = CASE WHEN entity.topicSeq >= excluded.topicSeq OR excluded.topicSeq IS NULL
                THEN entity.topicSeq ELSE excluded.topicSeq END
        WHERE excluded.version > entity.version
        """

    /// SQLite's `SQLITE_TRANSIENT` (`(sqlite3_destructor_type)-1`, a macro Swift does not import): copy the value.
    private static let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    /// A pointer to bind an empty text with (null would bind NULL).
    private static var emptyText: UnsafePointer<CChar> {
        UnsafeRawPointer(("" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self)
    }

    private static func bind(_ text: String, at index: CInt, of statement: Statement) throws {
        var text = text
        let code = text.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                sqlite3_bind_text(statement.sqliteStatement, index, chars.baseAddress ?? emptyText, CInt(chars.count), sqliteTransient)
            }
        }
        try check(code, binding: index)
    }

    /// A binding's result: binding fails only for an index out of range or a value too large.
    private static func check(_ code: CInt, binding index: CInt) throws {
        guard code != SQLITE_OK else { return }
        throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "binding the value at \(index)", sql: upsertSQL)
    }
}
