// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI

#if canImport(Glibc)
    import Glibc
#endif

/// A damaged outbox the engine salvaged at start (``LiveClient/startReport``): the writes still readable went,
/// in their order and with their write ids, into a new outbox; the damaged file was kept aside, never deleted.
public struct OutboxSalvage: Sendable, Equatable {
    /// The outbox's path (now the new outbox).
    public let path: String
    /// Where the damaged file is kept (`<path>.damaged-<UTC time>`; its journal, if it had one, beside it with
    /// `-journal`).
    public let movedTo: String
    /// Writes read from the damaged file and queued again.
    public let salvaged: Int
    /// Rows read but not usable (a field missing or of another type, a write that does not decode), when the
    /// whole table could be read; `nil` when it could not (an emptied file, a damaged page): how many writes were
    /// lost then cannot be known.
    public let unreadable: Int?
    /// Why the file was taken as damaged.
    public let reason: String
}

extension OutboxStore {
    /// Opens the outbox at `path`, salvaging it first when it is damaged (see ``salvage(path:monitor:now:reason:)``).
    /// - Returns: the outbox, and what was salvaged, if anything.
    /// - Throws: ``LiveError``: the storage's own failure (a full or read-only file system), or
    ///   ``LiveError/Code/storageDamaged`` when the outbox is damaged and could not be salvaged (everything is
    ///   then left as it was).
    package static func open(path: String, monitor: StorageMonitor, now: Date = Date()) throws(LiveError) -> (OutboxStore, OutboxSalvage?) {
        if !FileManager.default.fileExists(atPath: path) {
            try create(at: path, monitor: monitor)
        }
        do {
            return (OutboxStore(path: path, queue: try openQueue(path), monitor: monitor), nil)
        } catch {
            let failure = monitor.failure(error, doing: "opening the outbox", path: path)
            guard failure.code == .storageDamaged else { throw failure }
            let salvage = try salvage(path: path, monitor: monitor, now: now, reason: "\(error)")
            do {
                return (OutboxStore(path: path, queue: try openQueue(path), monitor: monitor), salvage)
            } catch {
                throw monitor.failure(error, doing: "opening the salvaged outbox", path: path)
            }
        }
    }

    /// Salvages the damaged outbox at `path`: every write still readable (read from a copy of the file and its
    /// journal, so the damaged file is never changed) goes into a new outbox made whole and synced under a
    /// temporary name, with its id (the order) and write id (the cloud's `Idempotency-Key`); then the damaged file
    /// is linked to `<path>.damaged-<time>` and the new outbox renamed over it. A crash at any point leaves either
    /// the damaged outbox (salvaged again at the next start) or the new one, never neither.
    static func salvage(path: String, monitor: StorageMonitor, now: Date, reason: String) throws(LiveError) -> OutboxSalvage {
        let fileManager = FileManager.default
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime, .withTimeZone]
        var movedTo = "\(path).damaged-\(formatter.string(from: now).replacingOccurrences(of: ":", with: ""))"
        var suffix = 1
        while fileManager.fileExists(atPath: movedTo) {
            suffix += 1
            movedTo = "\(path).damaged-\(formatter.string(from: now).replacingOccurrences(of: ":", with: ""))-\(suffix)"
        }
        let read = readEntries(path: path)
        let salvagePath = path + ".salvage"
        var linked: [String] = []
        do {
            try? fileManager.removeItem(atPath: salvagePath)
            try? fileManager.removeItem(atPath: salvagePath + "-journal")
            let queue = try DatabaseQueue(path: salvagePath, configuration: configuration)
            try migrator.migrate(queue)
            try queue.inTransaction { db in
                for entry in read.entries {
                    try db.execute(
                        sql: "INSERT INTO outbox (id, collection, objectId, write, ifVersion, writeId) VALUES (?, ?, ?, ?, ?, ?)",
                        arguments: [entry.id, entry.key.collection, entry.key.id, try encode(entry.write), entry.ifVersion, entry.writeID]
                    )
                }
                return .commit
            }
            try queue.close()
            // Kept aside first (a second name for the same file), then the new outbox takes the name.
            try link(path, movedTo)
            linked.append(movedTo)
            let journal = path + "-journal"
            if fileManager.fileExists(atPath: journal) {
                try link(journal, movedTo + "-journal")
                linked.append(movedTo + "-journal")
                guard unlink(journal) == 0 else { throw posixError("removing \(journal)") }
            }
            guard rename(salvagePath, path) == 0 else { throw posixError("renaming \(salvagePath) to \(path)") }
            syncDirectory(of: path)
        } catch {
            // Everything as it was: the new outbox gone, the damaged file under its name alone, its journal back.
            try? fileManager.removeItem(atPath: salvagePath)
            try? fileManager.removeItem(atPath: salvagePath + "-journal")
            if linked.contains(movedTo + "-journal") {
                if fileManager.fileExists(atPath: path + "-journal") {
                    unlink(movedTo + "-journal")
                } else {
                    rename(movedTo + "-journal", path + "-journal")
                }
            }
            if linked.contains(movedTo) { unlink(movedTo) }
            let failure = monitor.failure(error, doing: "salvaging the damaged outbox", path: path)
            throw LiveError(
                code: .storageDamaged,
                message: """
                    the outbox at \(path) is damaged (\(reason)) and could not be salvaged (\(failure.message)). It holds the \
                    writes clients were told are queued, so the daemon does not start without it; nothing in it was sent \
                    or removed. To keep what is intact: sqlite3 \(path) .recover | sqlite3 \(path).recovered, then move \
                    \(path).recovered to \(path). To start without those writes: mv \(path) \(path).damaged
                    """
            )
        }
        return OutboxSalvage(
            path: path,
            movedTo: movedTo,
            salvaged: read.entries.count,
            unreadable: read.complete ? read.unreadable : nil,
            reason: reason
        )
    }

    /// The writes readable in the outbox at `path`, in order: read from a copy of it (and of its journal, which
    /// SQLite rolls back if it is a valid one), first to last until a damaged page, then last to first down to one.
    private static func readEntries(path: String) -> (entries: [OutboxEntry], unreadable: Int, complete: Bool) {
        let fileManager = FileManager.default
        let copy = path + ".salvage-read"
        defer {
            try? fileManager.removeItem(atPath: copy)
            try? fileManager.removeItem(atPath: copy + "-journal")
        }
        var entries: [OutboxEntry] = []
        var unreadable = 0
        var complete = true
        do {
            try? fileManager.removeItem(atPath: copy)
            try? fileManager.removeItem(atPath: copy + "-journal")
            try fileManager.copyItem(atPath: path, toPath: copy)
            if fileManager.fileExists(atPath: path + "-journal") { try fileManager.copyItem(atPath: path + "-journal", toPath: copy + "-journal") }
            var configuration = Configuration()
            configuration.label = "livegate.outbox.salvage"
            // SQLite then takes a file shorter than its header says (truncated) as the pages it has, instead of
            // refusing the whole file as malformed.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA writable_schema = ON") }
            let queue = try DatabaseQueue(path: copy, configuration: configuration)
            defer { try? queue.close() }
            try queue.inDatabase { db in
                func take(_ row: Row, into list: inout [OutboxEntry]) {
                    if let entry = salvagedEntry(row) { list.append(entry) } else { unreadable += 1 }
                }
                do {
                    let rows = try Row.fetchCursor(db, sql: "SELECT id, collection, objectId, write, ifVersion, writeId FROM outbox ORDER BY id")
                    while let row = try rows.next() { take(row, into: &entries) }
                } catch {
                    complete = false
                    // The rows after the damage, from the last one back.
                    var tail: [OutboxEntry] = []
                    let after = entries.last?.id ?? 0
                    do {
                        let rows = try Row.fetchCursor(
                            db,
                            sql: "SELECT id, collection, objectId, write, ifVersion, writeId FROM outbox WHERE id > ? ORDER BY id DESC",
                            arguments: [after]
                        )
                        while let row = try rows.next() { take(row, into: &tail) }
                    } catch {}
                    entries += tail.reversed()
                }
            }
        } catch {
            complete = false
        }
        return (entries, unreadable, complete)
    }

    /// A row as a write, or `nil` when any field is missing or of another type, or the write does not decode
    /// (read without GRDB's typed subscripts, which trap on a value of another type).
    private static func salvagedEntry(_ row: Row) -> OutboxEntry? {
        let value = { (column: String) -> DatabaseValue in row[column] }
        guard let id = Int64.fromDatabaseValue(value("id")),
            let collection = String.fromDatabaseValue(value("collection")),
            let objectID = String.fromDatabaseValue(value("objectId")),
            let text = String.fromDatabaseValue(value("write")),
            EntityKey.isValidName(collection), EntityKey.isValidName(objectID),
            let write = try? decodeWrite(text)
        else { return nil }
        let ifVersion = value("ifVersion")
        let writeID = value("writeId")
        guard ifVersion.isNull || Int64.fromDatabaseValue(ifVersion) != nil, writeID.isNull || String.fromDatabaseValue(writeID) != nil else {
            return nil
        }
        return OutboxEntry(
            id: id,
            key: EntityKey(collection: collection, id: objectID),
            write: write,
            ifVersion: Int64.fromDatabaseValue(ifVersion),
            writeID: String.fromDatabaseValue(writeID)
        )
    }

    private static func link(_ from: String, _ to: String) throws {
        guard Glibc.link(from, to) == 0 else { throw posixError("keeping \(from) as \(to)") }
    }

    private static func posixError(_ doing: String) -> DatabaseError {
        DatabaseError(resultCode: .SQLITE_IOERR, message: "\(doing): \(String(cString: strerror(errno)))")
    }
}
