// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import LiveSQLite
import Logging
import Synchronization

/// A damaged cache that the engine (``LiveClient/cacheRecovery``) moved aside.
public struct CacheRecovery: Sendable, Equatable {
    /// Where the cache is (a new, empty one now).
    public let path: String
    /// Where the damaged file went (its WAL, if it had one, to the same name with `-wal`).
    public let movedTo: String
    /// What SQLite said of it.
    public let reason: String
}

/// The persistent local cache: one SQLite file (WAL, through a GRDB `DatabasePool`) in the state directory.
///
/// Entities are stored as the cloud last confirmed them; a stored entity is only ever replaced by a
/// higher version, so the cache never goes back in time whatever order answers and events arrive in.
package final class CacheStore: Sendable {
    let path: String
    let pool: DatabasePool
    let monitor: StorageMonitor
    /// Checkpoints the WAL beside the writer (``runCheckpoints()``), so that the engine's loop, which stores
    /// realtime events, never copies the WAL into the file inside a commit.
    private let checkpointer: WALCheckpointer
    /// The version each evicted object had, by key, until the object is stored again: a realtime event older than
    /// it (a topic replaying what was missed, after the cache had a newer copy from a write's answer or another
    /// topic) is then not taken for the newest copy, so eviction never lets a window show an older copy again.
    /// Touched only inside the cache's write transactions, so in their order. Bounded (``evictedVersionsLimit``): emptied when full. Kept in the
    /// `evictedVersion` table too, in the same transactions, and read back at open: a restarted engine resumes a
    /// collection topic from its checkpoint, whose replay can bring such an older event as well.
    private let evictedVersions = Mutex<[EntityKey: Int64]>([:])
    static let evictedVersionsLimit = 100_000
    /// Whether the `checkpoint` table may hold an object topic's checkpoint (one kept apart from its row: see
    /// ``saveCheckpoint(_:_:in:)``): read at open, set before such a row is written, never cleared. While it is
    /// not, ``starts(of:)`` reads the rows alone, without looking each one's topic up in the table. The table
    /// holds none unless a fetch found an object older than the copy held, or the object's event came before
    /// the object.
    private let objectCheckpointsApart = Atomic<Bool>(true)
    /// Whether ``close()`` was called.
    private let closed = Atomic<Bool>(false)

    /// Opens (or creates) the cache at `path`, and checks it (`PRAGMA quick_check`).
    /// - Throws: the SQLite error; ``open(path:monitor:now:)`` is what the engine calls.
    private init(path: String, monitor: StorageMonitor) throws {
        self.path = path
        self.monitor = monitor
        var configuration = Configuration()
        configuration.label = "livegate.cache"
        // A cache: a commit survives the process crashing (WAL), and the cloud holds the truth, so the WAL
        // is not synced at every commit (a realtime event each) but at checkpoints. Acknowledged writes are
        // not here but in the outbox (``OutboxStore``), which syncs every commit.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL; \(WALCheckpointer.writerPragmas)") }
        pool = try DatabasePool(path: path, configuration: configuration)
        do {
            let check = try pool.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
            if check != ["ok"] {
                throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: check.prefix(3).joined(separator: "; "))
            }
            try Self.migrator.migrate(pool)
            checkpointer = try WALCheckpointer(path: path, label: "livegate.cache.checkpointer", logger: Logger(label: "livegate.cache"))
            let remembered = try pool.read { db in
                try Row.fetchAll(db, sql: "SELECT collection, id, version FROM evictedVersion").map { row in
                    (EntityKey(collection: row["collection"], id: row["id"]), row["version"] as Int64)
                }
            }
            evictedVersions.withLock { $0 = Dictionary(remembered) { max($0, $1) } }
            // ':' + 1 is ';': every name starting with "object:".
            let apart = try pool.read { db in
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM checkpoint WHERE topic >= 'object:' AND topic < 'object;')")
            }
            objectCheckpointsApart.store(apart ?? true, ordering: .sequentiallyConsistent)
        } catch {
            try? pool.close()
            throw error
        }
        pool.add(transactionObserver: checkpointer.commitObserver, extent: .databaseLifetime)
    }

    /// Checkpoints the WAL after commits until the task is cancelled or the cache closed (the engine runs it
    /// while it runs; without it, the writer checkpoints at ``WALCheckpointer/backstopPages``).
    package func runCheckpoints() async { await checkpointer.run() }

    /// Opens the cache at `path`. A damaged one (not a database, or failing its check) is moved aside, with its
    /// WAL, to `<path>.damaged-<UTC time>` (kept for inspection) and a new, empty cache made in its place: the
    /// cloud holds everything the cache did, and the outbox is a file of its own.
    /// - Returns: the store, and what was moved aside, if anything.
    /// - Throws: ``LiveError`` with a storage code (a full or read-only file system, an I/O error).
    package static func open(path: String, monitor: StorageMonitor, now: Date = Date()) throws(LiveError) -> (CacheStore, CacheRecovery?) {
        do {
            return (try CacheStore(path: path, monitor: monitor), nil)
        } catch  where StorageFault.classify(error) == .damaged {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime, .withTimeZone]
            let aside = "\(path).damaged-\(formatter.string(from: now).replacingOccurrences(of: ":", with: ""))"
            let fileManager = FileManager.default
            do {
                try fileManager.moveItem(atPath: path, toPath: aside)
                if fileManager.fileExists(atPath: path + "-wal") { try fileManager.moveItem(atPath: path + "-wal", toPath: aside + "-wal") }
                try? fileManager.removeItem(atPath: path + "-shm")
            } catch let moveError {
                throw LiveError(
                    code: .storageDamaged,
                    message:
                        "the cache at \(path) is damaged (\(error)) and could not be moved aside (\(moveError)); remove it, the daemon makes a new one"
                )
            }
            do {
                return (try CacheStore(path: path, monitor: monitor), CacheRecovery(path: path, movedTo: aside, reason: "\(error)"))
            } catch let newError {
                throw monitor.failure(newError, doing: "making a new cache in place of a damaged one", path: path)
            }
        } catch {
            throw monitor.failure(error, doing: "opening the cache", path: path)
        }
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
        migrator.registerMigration("v2-query-results") { db in
            try db.create(table: "queryResult") { table in
                table.primaryKey("window", .text)
                table.column("ids", .text).notNull()
                table.column("hasNext", .boolean).notNull()
                table.column("hasPrevious", .boolean).notNull()
                table.column("count", .integer).notNull()
            }
        }
        migrator.registerMigration("v3-outbox") { db in
            try db.create(table: "outbox") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("collection", .text).notNull()
                table.column("objectId", .text).notNull()
                table.column("write", .text).notNull()
                table.column("ifVersion", .integer)
            }
        }
        migrator.registerMigration("v4-realtime-checkpoints") { db in
            try db.create(table: "checkpoint") { table in
                table.primaryKey("topic", .text)
                table.column("seq", .integer).notNull()
            }
        }
        migrator.registerMigration("v5-outbox-write-ids") { db in
            // The cloud's Idempotency-Key for each queued write, so a write resent after a lost answer
            // (or a restart) is applied once.
            try db.alter(table: "outbox") { table in table.add(column: "writeId", .text) }
        }
        migrator.registerMigration("v6-result-index", migrate: createResultIndexTables)
        migrator.registerMigration("v7-query-result-seq") { db in
            // The collection topic's sequence number the stored result is as of: a restart resumes from it.
            try db.alter(table: "queryResult") { table in table.add(column: "seq", .integer) }
        }
        migrator.registerMigration("v8-evicted-versions") { db in
            // The version of each evicted object until it is stored again (see `evictedVersions`).
            try db.create(table: "evictedVersion", options: .withoutRowID) { table in
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.primaryKey(["collection", "id"])
            }
        }
        migrator.registerMigration("v9-entity-topic-seq") { db in
            // The checkpoint of the object's own topic, kept in its row: written with the object, on a page the
            // write dirties anyway (a `checkpoint` row each was a second page in the WAL per realtime event).
            try db.alter(table: "entity") { table in table.add(column: "topicSeq", .integer) }
        }
        migrator.registerMigration("v10-result-item-sort-value", migrate: addResultItemSortValues)
        migrator.registerMigration("v11-exact-values") { db in
            // Copies written before values were kept exactly (numbers past 2^53 rounded, names merged) are
            // fetched again. Their versions stay known as evicted ones, so no version goes back.
            try db.execute(sql: "INSERT OR REPLACE INTO evictedVersion (collection, id, version) SELECT collection, id, version FROM entity")
            for table in ["entity", "queryResult", "resultItem", "resultIndex", "checkpoint"] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
        }
        return migrator
    }

    /// A query window's result as last fetched: the ordered ids (entities are in the entity table).
    package struct QueryResult: Sendable, Codable {
        var ids: [String]
        var hasNext: Bool
        var hasPrevious: Bool
        var count: Int
        /// The collection topic's sequence number the result is as of (every event up to it is in it), when
        /// known: a later run resumes the topic from there and replays the rest instead of fetching.
        var seq: Int64? = nil

        package init(ids: [String], hasNext: Bool, hasPrevious: Bool, count: Int, seq: Int64? = nil) {
            self.ids = ids
            self.hasNext = hasNext
            self.hasPrevious = hasPrevious
            self.count = count
            self.seq = seq
        }
    }

    /// The cached result of a window, with its entities in order (ids whose entity is no longer cached, or is
    /// deleted, are left out).
    func queryResult(_ window: String, collection: String) async throws(LiveError) -> (QueryResult, [Entity])? {
        do {
            return try await pool.read { db -> (QueryResult, [Entity])? in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM queryResult WHERE window = ?", arguments: [window]) else {
                    return nil
                }
                let idsText: String = row["ids"]
                let ids = try JSONDecoder().decode([String].self, from: Data(idsText.utf8))
                var entities: [Entity] = []
                for id in ids {
                    if let entity = try Self.entity(db, EntityKey(collection: collection, id: id)), !entity.deleted {
                        entities.append(entity)
                    }
                }
                let result = QueryResult(ids: ids, hasNext: row["hasNext"], hasPrevious: row["hasPrevious"], count: row["count"], seq: row["seq"])
                return (result, entities)
            }
        } catch {
            throw monitor.failure(error, doing: "reading a query result from the cache", path: path)
        }
    }

    /// Stores a window's result and its entities (each only if newer than what the cache holds), in one
    /// transaction.
    package func storeQueryResult(_ window: String, _ result: QueryResult, entities: [Entity]) async throws(LiveError) {
        do {
            let ids = String(decoding: try JSONEncoder().encode(result.ids), as: UTF8.self)
            try await pool.write { db in
                for entity in entities { _ = try self.upsert(entity, in: db) }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO queryResult (window, ids, hasNext, hasPrevious, count, seq) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [window, ids, result.hasNext, result.hasPrevious, result.count, result.seq]
                )
            }
            monitor.success(path)
        } catch {
            throw monitor.failure(error, doing: "writing a query result to the cache", path: path)
        }
    }

    static func entity(_ db: Database, _ key: EntityKey) throws -> Entity? {
        let statement = try db.cachedStatement(sql: "SELECT \(entityColumns) FROM entity WHERE collection = ? AND id = ?")
        // The cursor kept until the row is read: once gone, it resets the statement, whose columns are then empty.
        let cursor = try Row.fetchCursor(statement, arguments: [key.collection, key.id])
        return try withExtendedLifetime(cursor) {
            guard let row = try cursor.next() else { return nil }
            return try entity(from: row, of: statement)
        }
    }

    /// The entity table's columns, in the order ``entity(from:of:)`` reads them.
    static let entityColumns = "collection, id, version, data, createdAt, updatedAt, deleted"
    static let entityColumnCount = entityColumns.split(separator: ",").count

    /// An entity from the row of ``entityColumns`` that `statement` stands on (its cursor still open): the columns
    /// by position (by name, each is a case-insensitive lookup) and the data's JSON parsed from SQLite's bytes in
    /// place (no `Data` a row, nor a generic parse through it: a third of a cached row's reading).
    static func entity(from row: Row, of statement: Statement) throws -> Entity {
        let sqlite = statement.sqliteStatement
        guard sqlite3_column_type(sqlite, 3) != SQLITE_NULL else {
            throw DatabaseError(resultCode: .SQLITE_MISMATCH, message: "an entity's data is NULL")
        }
        // The pointer first, then the length (SQLite's order: the length of the form the pointer was taken in).
        let pointer = sqlite3_column_blob(sqlite, 3)
        let data = try CloudJSON.value(utf8: UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(sqlite, 3))))
        return Entity(
            collection: row[0],
            id: row[1],
            version: row[2],
            data: data,
            createdAt: row[4],
            updatedAt: row[5],
            deleted: row[6]
        )
    }

    /// The cached entity, if any; records the access for eviction.
    package func entity(_ key: EntityKey) async throws(LiveError) -> Entity? {
        do {
            return try await pool.write { db -> Entity? in
                guard let entity = try Self.entity(db, key) else { return nil }
                try db.execute(
                    sql: "UPDATE entity SET lastAccess = ? WHERE collection = ? AND id = ?",
                    arguments: [Date().timeIntervalSince1970, key.collection, key.id]
                )
                return entity
            }
        } catch {
            throw monitor.failure(error, doing: "reading \(key) from the cache", path: path)
        }
    }

    /// The cached copies of `keys` and the checkpoints of their object topics (both in their order), in one read
    /// transaction (a reader's, not the writer's: it waits for no write, and one snapshot holds the copies and
    /// the checkpoints): what a burst of new observations starts from. Their access time is recorded when the
    /// engine activates them (``touch(_:)``), after the burst's cached answers.
    ///
    /// A cached object's checkpoints come with its row: the one kept in the row and, by a subquery on the
    /// `checkpoint` table's key, one kept apart (of a fetch that found the object older than the copy held, or
    /// written by a version before `v9-entity-topic-seq`), while the table may hold any
    /// (``objectCheckpointsApart``). Only the keys with no row are looked up in the table apart. Each row finds its
    /// place by its id, within its collection's keys (a burst of 10,000 built a topic's name for each key, and
    /// looked each up in the table apart: a quarter of this read).
    package func starts(of keys: [EntityKey]) async throws(LiveError) -> (entities: [Entity?], checkpoints: [Int64?]) {
        do {
            return try await pool.read { db in
                let layout = StartLayout(keys)
                var entities = [Entity?](repeating: nil, count: keys.count)
                var checkpoints = [Int64?](repeating: nil, count: keys.count)
                var apart = self.objectCheckpointsApart.load(ordering: .sequentiallyConsistent)
                while true {
                    try self.readRows(layout, apart: apart, into: &entities, &checkpoints, in: db)
                    // Read after the rows, so after this read's snapshot was taken: unset still, no such row was
                    // committed before it (it is set before one is written). Set meanwhile: read again with them.
                    if apart || !self.objectCheckpointsApart.load(ordering: .sequentiallyConsistent) { break }
                    apart = true
                }
                // Checkpoints of objects not cached: of an object the cloud did not have when fetched.
                var missing: [String: Int] = [:]
                for group in layout.groups {
                    for position in group.positions.values where entities[position] == nil {
                        missing[Topic.object(keys[position]).description] = position
                    }
                }
                let topics = Array(missing.keys)
                for start in stride(from: 0, to: topics.count, by: Self.idListLimit) {
                    let list = Self.paddedIDList(Array(topics[start..<min(start + Self.idListLimit, topics.count)]))
                    let rows = try Row.fetchCursor(
                        db.cachedStatement(sql: "SELECT topic, seq FROM checkpoint WHERE topic IN (\(Self.placeholders(list.count)))"),
                        arguments: StatementArguments(list)
                    )
                    while let row = try rows.next() {
                        if let position = missing[row[0] as String] { checkpoints[position] = row[1] }
                    }
                }
                for (position, first) in layout.repeats {
                    entities[position] = entities[first]
                    checkpoints[position] = checkpoints[first]
                }
                return (entities, checkpoints)
            }
        } catch {
            throw monitor.failure(error, doing: "reading \(keys.count) objects from the cache", path: path)
        }
    }

    /// The cached rows of `layout`'s keys, and the checkpoints they come with, each at its key's position: the one
    /// kept in the row and, when `apart`, the one kept in the `checkpoint` table.
    private func readRows(
        _ layout: StartLayout,
        apart: Bool,
        into entities: inout [Entity?],
        _ checkpoints: inout [Int64?],
        in db: Database
    ) throws {
        for group in layout.groups {
            for start in stride(from: 0, to: group.ids.count, by: Self.idListLimit) {
                let ids = Self.paddedIDList(Array(group.ids[start..<min(start + Self.idListLimit, group.ids.count)]))
                // The rows read in place, not copied; the checkpoints after the entity's columns, the table's by the
                // topic's name (``Topic/description`` of `.object`) built in SQL.
                let checkpointApart = apart ? ", (SELECT seq FROM checkpoint WHERE topic = 'object:' || entity.collection || '/' || entity.id)" : ""
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT \(Self.entityColumns), topicSeq\(checkpointApart) \
                        FROM entity WHERE collection = ? AND id IN (\(Self.placeholders(ids.count)))
                        """
                )
                let rows = try Row.fetchCursor(statement, arguments: StatementArguments([group.collection] + ids))
                while let row = try rows.next() {
                    guard let position = group.positions[row[1] as String] else { continue }
                    entities[position] = try Self.entity(from: row, of: statement)
                    checkpoints[position] = Self.later(row[Self.entityColumnCount], apart ? row[Self.entityColumnCount + 1] : nil)
                }
            }
        }
    }

    /// Where each of the keys ``starts(of:)`` reads goes in its answer: their ids by collection, each with its
    /// position (the first, for a key asked for more than once). Consecutive keys of one collection (a burst's, as
    /// a rule) compare its name rather than hash it.
    struct StartLayout {
        var groups: [(collection: String, ids: [String], positions: [String: Int])] = []
        /// Keys asked for again: the position, and that of the first time.
        var repeats: [(position: Int, first: Int)] = []

        init(_ keys: [EntityKey]) {
            var groupOf: [String: Int] = [:]
            var current = -1
            for (position, key) in keys.enumerated() {
                if current < 0 || groups[current].collection != key.collection {
                    if let existing = groupOf[key.collection] {
                        current = existing
                    } else {
                        current = groups.count
                        groupOf[key.collection] = current
                        groups.append((key.collection, [], [:]))
                    }
                }
                if let first = groups[current].positions.updateValue(position, forKey: key.id) {
                    groups[current].positions[key.id] = first
                    repeats.append((position, first))
                } else {
                    groups[current].ids.append(key.id)
                }
            }
        }
    }

    /// `count` SQL parameters, comma-separated.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ",")
    }

    /// Records that `keys` were used now (those the cache holds), as ``entity(_:)`` does for one: eviction takes
    /// the least recently used first.
    package func touch(_ keys: [EntityKey]) async throws(LiveError) {
        guard !keys.isEmpty else { return }
        do {
            try await pool.write { db in
                let now = Date().timeIntervalSince1970
                for list in Self.idLists(keys) {
                    try db.cachedStatement(sql: "UPDATE entity SET lastAccess = ? WHERE collection = ? AND id IN (\(list.marks))")
                        .execute(arguments: [now, list.collection] + StatementArguments(list.ids))
                }
            }
        } catch {
            throw monitor.failure(error, doing: "recording the use of \(keys.count) objects in the cache", path: path)
        }
    }

    /// The most ids (or topics) an `IN` list of ``starts(of:)`` and ``touch(_:)`` holds.
    package static let idListLimit = 512

    /// `keys` as the `IN` lists of ``touch(_:)``: by collection, at most ``idListLimit`` ids
    /// each (SQLite takes at most 32,766 parameters a statement), padded (``paddedIDList(_:)``), with their
    /// placeholders.
    static func idLists(_ keys: [EntityKey]) -> [(collection: String, ids: [String], marks: String)] {
        var lists: [(collection: String, ids: [String], marks: String)] = []
        for (collection, keys) in Dictionary(grouping: keys, by: \.collection) {
            for start in stride(from: 0, to: keys.count, by: idListLimit) {
                let ids = paddedIDList(keys[start..<min(start + idListLimit, keys.count)].map(\.id))
                lists.append((collection, ids, placeholders(ids.count)))
            }
        }
        return lists
    }

    /// `ids` (at most ``idListLimit``) with the last repeated up to the next power of two from 8: the statements
    /// of ``starts(of:)`` and ``touch(_:)`` are cached by their text, and one per length of list would keep up to
    /// 1,000 prepared statements of up to 500 parameters on a connection (13 MB after a burst of 100,000
    /// observations, which made lists of every length). Seven lengths; a repeated id matches its row once.
    package static func paddedIDList(_ ids: [String]) -> [String] {
        guard let last = ids.last else { return ids }
        var length = 8
        while length < ids.count { length *= 2 }
        return ids + Array(repeating: last, count: length - ids.count)
    }

    /// The later of two checkpoints of one topic (either may be missing).
    private static func later(_ a: Int64?, _ b: Int64?) -> Int64? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }

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
    private func saveCheckpoint(_ topic: Topic, _ seq: Int64, in db: Database) throws {
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
    /// here through SQLite's C interface: GRDB's `execute(arguments:)` boxed each of the nine values, checked
    /// them, bound them in nested closures and prepared its observers, ~40 % of the write's time in process
    /// (`livegate-bench`'s cache-write figure; Benchmarks.md). What GRDB's execution adds is not needed here: the
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

    /// Closes the database: first every committed page is written into the database file and the WAL is
    /// truncated to nothing (a clean stop leaves one self-contained file, not the cache's whole recent history
    /// in the WAL), then the connections close. The store must not be used afterwards; closing it again does
    /// nothing (it used to reach SQLite with the closed connection and crash).
    package func close() throws {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        try? checkpointer.close()
        do {
            try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        } catch {
            throw monitor.failure(error, doing: "checkpointing the cache", path: path)
        }
        try pool.close()
    }
}
