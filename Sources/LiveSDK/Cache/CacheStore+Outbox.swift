// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// One write of this host waiting for the cloud, in the order it was made.
struct OutboxEntry: Sendable, Equatable {
    let id: Int64
    let key: EntityKey
    let write: LiveWrite
    let ifVersion: Int64?
    /// A random id the cloud knows the write by (`Idempotency-Key`), kept across restarts; `nil` for writes
    /// queued before write ids existed.
    let writeID: String?
}

/// The durable write outbox: writes are stored here, synced to disk, before anyone is told they were
/// accepted; each leaves only when the cloud confirmed it (in the same transaction that stores the
/// confirmed entity) or rejected it.
extension CacheStore {
    /// Queues a write; returns its id (increasing: the order writes are sent in).
    func enqueue(_ key: EntityKey, _ write: LiveWrite, ifVersion: Int64?) async throws(LiveError) -> Int64 {
        do {
            let text = try Self.encode(write)
            return try await durably { db in
                try db.execute(
                    sql: "INSERT INTO outbox (collection, objectId, write, ifVersion, writeId) VALUES (?, ?, ?, ?, ?)",
                    arguments: [key.collection, key.id, text, ifVersion, UUID().uuidString]
                )
                return db.lastInsertedRowID
            }
        } catch {
            throw LiveError(code: .cacheFailure, message: "queueing the write of \(key) in the outbox at \(path) failed: \(error)")
        }
    }

    /// The oldest queued write whose id is over `after`, if any.
    func nextInOutbox(after: Int64) async throws(LiveError) -> OutboxEntry? {
        do {
            return try await pool.read { db in
                try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id > ? ORDER BY id LIMIT 1", arguments: [after]).map(Self.entry(from:))
            }
        } catch {
            throw LiveError(code: .cacheFailure, message: "reading the outbox at \(path) failed: \(error)")
        }
    }

    /// Every queued write, oldest first; or only those of `key`.
    func outbox(of key: EntityKey? = nil) async throws(LiveError) -> [OutboxEntry] {
        do {
            return try await pool.read { db in
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
                return try rows.map(Self.entry(from:))
            }
        } catch {
            throw LiveError(code: .cacheFailure, message: "reading the outbox at \(path) failed: \(error)")
        }
    }

    /// The cloud confirmed the write: it leaves the outbox and its entity is stored, in one transaction.
    func confirm(_ id: Int64, _ entity: Entity) async throws(LiveError) {
        do {
            try await durably { db in
                try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id])
                _ = try Self.upsert(entity, in: db)
            }
        } catch {
            throw LiveError(code: .cacheFailure, message: "confirming a write in the cache at \(path) failed: \(error)")
        }
    }

    /// The cloud rejected the write: it leaves the outbox.
    func drop(_ id: Int64) async throws(LiveError) {
        do {
            try await durably { db in try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id]) }
        } catch {
            throw LiveError(code: .cacheFailure, message: "removing a write from the outbox at \(path) failed: \(error)")
        }
    }

    /// One transaction synced to disk before it returns (`synchronous = FULL`, where the cache's other
    /// writes use NORMAL): a write the outbox accepted survives a power loss, not just a crash.
    private func durably<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
            var result: T?
            try db.inTransaction {
                result = try body(db)
                return .commit
            }
            return result!
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

    private static func encode(_ write: LiveWrite) throws -> String {
        let stored: StoredWrite
        switch write {
        case .replace(let data): stored = StoredWrite(kind: "replace", data: data)
        case .merge(let patch): stored = StoredWrite(kind: "merge", data: patch)
        case .delete: stored = StoredWrite(kind: "delete")
        }
        return String(decoding: try JSONEncoder().encode(stored), as: UTF8.self)
    }

    private static func decodeWrite(_ text: String) throws -> LiveWrite {
        let stored = try JSONDecoder().decode(StoredWrite.self, from: Data(text.utf8))
        switch (stored.kind, stored.data) {
        case ("replace", let data?): return .replace(data)
        case ("merge", let data?): return .merge(data)
        case ("delete", _): return .delete
        default: throw LiveError(code: .cacheFailure, message: "an outbox entry of unknown kind \(stored.kind)")
        }
    }
}
