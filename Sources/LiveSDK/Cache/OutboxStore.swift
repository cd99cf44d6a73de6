// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

#if canImport(Glibc)
    import Glibc
#endif

/// One write of this host waiting for the cloud, in the order it was made.
package struct OutboxEntry: Sendable, Equatable {
    package let id: Int64
    package let key: EntityKey
    let write: LiveWrite
    let ifVersion: Int64?
    /// A random id the cloud knows the write by (`Idempotency-Key`), kept across restarts; `nil` for writes
    /// queued before write ids existed.
    let writeID: String?
}

/// The durable write outbox: a SQLite file of its own (`outbox.sqlite`), apart from the cache, so damage to
/// the cache cannot reach an acknowledged write and the cache can always be thrown away and rebuilt.
///
/// A write is committed here, synced to disk, before anyone is told it was accepted: a rollback journal
/// (not a WAL) with `synchronous = FULL`, so a committed write is in the database file itself once the
/// commit returns, and survives a power cut, and losing or damaging a journal file never takes it away.
/// A write leaves only when the cloud confirmed it (after its entity was stored in the cache: a crash in
/// between resends it under the same write id, which the cloud applies once) or rejected it.
///
/// The file is made whole (schema included) under a temporary name and renamed into place, so an
/// `outbox.sqlite` that is empty or not a database is damage, never a new outbox. The engine opens it with
/// ``open(path:monitor:now:)``, which salvages a damaged one (``OutboxSalvage``); ``init(path:monitor:)`` alone
/// fails on damage with ``LiveError/Code/storageDamaged`` and a message that says what to do.
package final class OutboxStore: Sendable {
    let path: String
    private let queue: DatabaseQueue
    private let monitor: StorageMonitor

    package init(path: String, monitor: StorageMonitor) throws(LiveError) {
        self.path = path
        self.monitor = monitor
        if !FileManager.default.fileExists(atPath: path) {
            try Self.create(at: path, monitor: monitor)
        }
        do {
            queue = try Self.openQueue(path)
        } catch {
            let failure = monitor.failure(error, doing: "opening the outbox", path: path)
            guard failure.code == .storageDamaged else { throw failure }
            throw LiveError(
                code: .storageDamaged,
                message: """
                    the outbox at \(path) is damaged (\(error)). It holds the writes clients were told are queued, \
                    so the daemon does not start without it; nothing in it was sent or removed. To keep what is \
                    intact: sqlite3 \(path) .recover | sqlite3 \(path).recovered, then move \(path).recovered to \
                    \(path). To start without those writes: mv \(path) \(path).damaged
                    """
            )
        }
    }

    /// An outbox over a queue opened already (``open(path:monitor:now:)``).
    init(path: String, queue: DatabaseQueue, monitor: StorageMonitor) {
        self.path = path
        self.queue = queue
        self.monitor = monitor
    }

    /// Opens the outbox file at `path` and checks it (`PRAGMA quick_check`); throws what SQLite says of a
    /// damaged one (an empty file is damage: the outbox is always made whole).
    static func openQueue(_ path: String) throws -> DatabaseQueue {
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        if size == 0 { throw DatabaseError(resultCode: .SQLITE_NOTADB, message: "the file is empty") }
        let queue = try DatabaseQueue(path: path, configuration: Self.configuration)
        let check = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
        if check != ["ok"] {
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: check.prefix(3).joined(separator: "; "))
        }
        try Self.migrator.migrate(queue)
        return queue
    }

    static var configuration: Configuration {
        var configuration = Configuration()
        configuration.label = "livegate.outbox"
        configuration.journalMode = .default
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        return configuration
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-outbox") { db in
            try db.create(table: "outbox") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("collection", .text).notNull()
                table.column("objectId", .text).notNull()
                table.column("write", .text).notNull()
                table.column("ifVersion", .integer)
                table.column("writeId", .text).unique()
            }
        }
        return migrator
    }

    /// Makes a new, empty outbox at `path`: whole under a temporary name, then renamed into place, and the
    /// directory synced so that the name lasts.
    static func create(at path: String, monitor: StorageMonitor) throws(LiveError) {
        let temporary = path + ".new"
        do {
            try? FileManager.default.removeItem(atPath: temporary)
            let queue = try DatabaseQueue(path: temporary, configuration: configuration)
            try migrator.migrate(queue)
            try queue.close()
            guard rename(temporary, path) == 0 else {
                throw DatabaseError(resultCode: .SQLITE_CANTOPEN, message: "rename to \(path): \(String(cString: strerror(errno)))")
            }
            syncDirectory(of: path)
        } catch {
            throw monitor.failure(error, doing: "creating the outbox", path: path)
        }
    }

    /// Syncs the directory holding `path`, so that a name made or changed in it lasts.
    static func syncDirectory(of path: String) {
        let directory = Glibc.open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY)
        if directory >= 0 {
            fsync(directory)
            Glibc.close(directory)
        }
    }

    /// Queues a write, synced to disk; returns its id (increasing: the order writes are sent in).
    package func enqueue(_ key: EntityKey, _ write: LiveWrite, ifVersion: Int64?, writeID: String = UUID().uuidString) async throws(LiveError)
        -> Int64
    {
        do {
            let text = try Self.encode(write)
            let id = try await access { db in
                try Self.inTransaction(db) {
                    try db.execute(
                        sql: "INSERT INTO outbox (collection, objectId, write, ifVersion, writeId) VALUES (?, ?, ?, ?, ?)",
                        arguments: [key.collection, key.id, text, ifVersion, writeID]
                    )
                    return db.lastInsertedRowID
                }
            }
            monitor.success(path)
            return id
        } catch {
            throw monitor.failure(error, doing: "queueing the write of \(key) in the outbox", path: path)
        }
    }

    /// Adds writes of an older outbox (the cache's, before the outbox had a file of its own) after the ones
    /// queued here, in their order; one whose write id is here already is skipped. Returns how many it added.
    package func adopt(_ entries: [OutboxEntry]) throws(LiveError) -> Int {
        do {
            let added = try queue.writeWithoutTransaction { db -> Int in
                try Self.checkOpen(db)
                return try Self.inTransaction(db) { try Self.adopt(entries, db) }
            }
            monitor.success(path)
            return added
        } catch {
            throw monitor.failure(error, doing: "moving the cache's queued writes into the outbox", path: path)
        }
    }

    private static func adopt(_ entries: [OutboxEntry], _ db: Database) throws -> Int {
        var added = 0
        for entry in entries {
            if let writeID = entry.writeID,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM outbox WHERE writeId = ?", arguments: [writeID]) == true
            {
                continue
            }
            try db.execute(
                sql: "INSERT INTO outbox (collection, objectId, write, ifVersion, writeId) VALUES (?, ?, ?, ?, ?)",
                arguments: [entry.key.collection, entry.key.id, try Self.encode(entry.write), entry.ifVersion, entry.writeID]
            )
            added += 1
        }
        return added
    }

    /// The oldest queued write whose id is over `after`, if any.
    package func next(after: Int64) async throws(LiveError) -> OutboxEntry? {
        do {
            return try await access { db in
                try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id > ? ORDER BY id LIMIT 1", arguments: [after]).map(Self.entry(from:))
            }
        } catch {
            throw monitor.failure(error, doing: "reading the outbox", path: path)
        }
    }

    /// Every queued write, oldest first; or only those of `key`.
    package func entries(of key: EntityKey? = nil) async throws(LiveError) -> [OutboxEntry] {
        do {
            return try await access { db in try Self.entries(db, of: key) }
        } catch {
            throw monitor.failure(error, doing: "reading the outbox", path: path)
        }
    }

    static func entries(_ db: Database, of key: EntityKey? = nil) throws -> [OutboxEntry] {
        let rows: [Row]
        if let key {
            rows = try Row.fetchAll(
                db,
                sql: "SELECT * FROM outbox WHERE collection = ? AND objectId = ? ORDER BY id",
                arguments: [key.collection, key.id]
            )
        } else {
            rows = try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY id")
        }
        return try rows.map(entry(from:))
    }

    /// The write is done (the cloud confirmed or rejected it): it leaves the outbox.
    package func remove(_ id: Int64) async throws(LiveError) {
        do {
            try await access { db in try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id]) }
            monitor.success(path)
        } catch {
            throw monitor.failure(error, doing: "removing a write from the outbox", path: path)
        }
    }

    /// Runs `body` on the connection unless the outbox is closed, serialized with every other access and with
    /// ``close()`` (the queue's one thread). GRDB's `DatabaseQueue` does not refuse a closed connection: it hands
    /// SQLite the null handle: SIGSEGV in `sqlite3_get_autocommit`, as a stopping daemon died in a test run (the
    /// engine closes the outbox on the way out, while tasks it started may still use it). One statement needs
    /// no transaction to read a consistent state; writes take theirs in `body` (``inTransaction(_:_:)``).
    private func access<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await queue.writeWithoutTransaction { db in
            try Self.checkOpen(db)
            return try body(db)
        }
    }

    private static func checkOpen(_ db: Database) throws {
        guard db.sqliteConnection != nil else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the outbox is closed: the engine is stopping")
        }
    }

    private static func inTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        var result: T?
        try db.inTransaction {
            result = try body()
            return .commit
        }
        return result!
    }

    /// The open connection's journal mode and `synchronous` level, read back (tests: what the outbox promises
    /// above is what SQLite was told).
    package func durability() throws -> (journalMode: String?, synchronous: Int?) {
        try queue.inDatabase { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
    }

    /// Closes the file. Any use afterwards fails (``LiveError/Code/cacheFailure``: the outbox is closed).
    package func close() throws(LiveError) {
        do {
            try queue.close()
        } catch {
            throw monitor.failure(error, doing: "closing the outbox", path: path)
        }
    }

    private static func entry(from row: Row) throws -> OutboxEntry {
        let text: String = row["write"]
        return OutboxEntry(
            id: row["id"],
            key: EntityKey(collection: row["collection"], id: row["objectId"]),
            write: try decodeWrite(text),
            ifVersion: row["ifVersion"],
            writeID: row["writeId"]
        )
    }

    private struct StoredWrite: Codable {
        var kind: String
        var data: JSONValue?
    }

    static func encode(_ write: LiveWrite) throws -> String {
        let stored: StoredWrite
        switch write {
        case .replace(let data): stored = StoredWrite(kind: "replace", data: data)
        case .merge(let patch): stored = StoredWrite(kind: "merge", data: patch)
        case .delete: stored = StoredWrite(kind: "delete")
        }
        // LiveJSON's encoder and decoder: the data kept exactly (Foundation's rounds numbers past 2^53).
        return String(decoding: try SortedJSONEncoder().encode(stored), as: UTF8.self)
    }

    static func decodeWrite(_ text: String) throws -> LiveWrite {
        let stored = try JSONValueDecoder.decode(StoredWrite.self, from: JSONValue(parsing: text))
        switch (stored.kind, stored.data) {
        case ("replace", let data?): return .replace(data)
        case ("merge", let data?): return .merge(data)
        case ("delete", _): return .delete
        default: throw LiveError(code: .cacheFailure, message: "an outbox entry of unknown kind \(stored.kind)")
        }
    }
}
