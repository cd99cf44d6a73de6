// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import LiveSQLite
import Logging
import Synchronization

/// A damaged cache that the engine (``LiveClient/startReport``) moved aside.
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
    let checkpointer: WALCheckpointer
    /// The version each evicted object had, by key, until the object is stored again: a realtime event older than
    /// it (a topic replaying what was missed, after the cache had a newer copy from a write's answer or another
    /// topic) is then not taken for the newest copy, so eviction never lets a window show an older copy again.
    /// Touched only inside the cache's write transactions, so in their order. Bounded (``evictedVersionsLimit``): emptied when full. Kept in the
    /// `evictedVersion` table too, in the same transactions, and read back at open: a restarted engine resumes a
    /// collection topic from its checkpoint, whose replay can bring such an older event as well.
    let evictedVersions = Mutex<[EntityKey: Int64]>([:])
    static let evictedVersionsLimit = 100_000
    /// Whether the `checkpoint` table may hold an object topic's checkpoint (one kept apart from its row: see
    /// ``saveCheckpoint(_:_:in:)``): read at open, set before such a row is written, never cleared. While it is
    /// not, ``starts(of:)`` reads the rows alone, without looking each one's topic up in the table. The table
    /// holds none unless a fetch found an object older than the copy held, or the object's event came before
    /// the object.
    let objectCheckpointsApart = Atomic<Bool>(true)
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
