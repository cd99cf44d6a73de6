// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// Streams, their per-user ACLs, and their messages (which go into the event log like writes do, so a
/// listener that reconnects with `since` gets every message it missed).
extension SQLiteStore {
    func createStream(_ name: String) async throws -> Bool {
        let now = StoreText.timestamp()
        return try await pool.write { db in
            try db.execute(sql: "INSERT INTO stream (name, createdAt) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", arguments: [name, now])
            return db.changesCount > 0
        }
    }

    func streamNames() async throws -> [String] {
        try await pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM stream ORDER BY name") }
    }

    func acl(stream: String, user: String) async throws -> StreamACL? {
        try await pool.read { db in try Self.acl(db, stream: stream, user: user) }
    }

    func setACL(_ acl: StreamACL, stream: String, user: String) async throws -> Bool {
        let text = try StoreText.encode(acl)
        return try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stream WHERE name = ?)", arguments: [stream]) == true else {
                return false
            }
            try db.execute(
                sql: "INSERT INTO stream_acl (stream, user, acl) VALUES (?, ?, ?) ON CONFLICT (stream, user) DO UPDATE SET acl = excluded.acl",
                arguments: [stream, user, text]
            )
            // In the log too, so every subscription the new ACL no longer allows ends.
            try db.execute(
                sql: "INSERT INTO event (collection, id, version, entity) VALUES (?, ?, 0, ?)",
                arguments: [LoggedEvent.logCollection(ofACLsOf: stream), user, text]
            )
            _ = try self.appended(db, .aclChanged(stream: stream, user: user, acl: acl))
            return true
        }
    }

    func send(_ message: JSONValue, stream: String, from: String, to: String) async throws -> StreamSendOutcome {
        let stored = StreamMessage(stream: stream, from: from, to: to, at: StoreText.timestamp(), message: message)
        let text = try StoreText.encode(stored)
        return try await pool.write { db in
            guard let acl = try Self.acl(db, stream: stream, user: to) else { return .noStream }
            guard acl.publishers.contains(from) else { return .forbidden }
            try db.execute(
                sql: "INSERT INTO event (collection, id, version, entity) VALUES (?, ?, 0, ?)",
                arguments: [LoggedEvent.logCollection(ofStream: stream), to, text]
            )
            let seq = try self.appended(db, .message(stored))
            return .sent(SentStreamMessage(seq: seq, message: stored))
        }
    }

    private static func acl(_ db: Database, stream: String, user: String) throws -> StreamACL? {
        guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stream WHERE name = ?)", arguments: [stream]) == true else {
            return nil
        }
        guard let text = try String.fetchOne(db, sql: "SELECT acl FROM stream_acl WHERE stream = ? AND user = ?", arguments: [stream, user])
        else { return StreamACL() }
        return try JSONDecoder().decode(StreamACL.self, from: Data(text.utf8))
    }
}
