// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// Streams, their per-user ACLs, and their messages (which go into the event log like writes do, so a
/// listener that reconnects with `since` gets every message it missed).
extension EntityStore {
    /// Creates the stream; `false` when it existed already.
    func createStream(_ name: String) async throws -> Bool {
        let now = Self.timestamp()
        return try await pool.write { db in
            try db.execute(sql: "INSERT INTO stream (name, createdAt) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", arguments: [name, now])
            return db.changesCount > 0
        }
    }

    /// Creates the streams that are missing (at start, from the configuration).
    func createStreams(_ names: [String]) throws {
        let now = Self.timestamp()
        try pool.write { db in
            for name in names {
                try db.execute(sql: "INSERT INTO stream (name, createdAt) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", arguments: [name, now])
            }
        }
    }

    func streamNames() async throws -> [String] {
        try await pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM stream ORDER BY name") }
    }

    func streamExists(_ name: String) async throws -> Bool {
        try await pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stream WHERE name = ?)", arguments: [name]) ?? false }
    }

    /// The user's ACL on the stream (empty when none was granted); `nil` when there is no such stream.
    func acl(stream: String, user: String) async throws -> StreamACL? {
        try await pool.read { db in try Self.acl(db, stream: stream, user: user) }
    }

    /// Replaces the user's ACL on the stream; `false` when there is no such stream.
    func setACL(_ acl: StreamACL, stream: String, user: String) async throws -> Bool {
        let text = try Self.encode(acl)
        return try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM stream WHERE name = ?)", arguments: [stream]) == true else {
                return false
            }
            try db.execute(
                sql: "INSERT INTO stream_acl (stream, user, acl) VALUES (?, ?, ?) ON CONFLICT (stream, user) DO UPDATE SET acl = excluded.acl",
                arguments: [stream, user, text]
            )
            return true
        }
    }

    enum SendOutcome: Sendable, Equatable {
        case sent(SentStreamMessage)
        case noStream
        /// The sender is not among the recipient's publishers.
        case forbidden
    }

    /// Appends a message from `from` to `to` on the stream, if the recipient's ACL lets the sender publish
    /// to them; the check and the append are one transaction.
    func send(_ message: JSONValue, stream: String, from: String, to: String) async throws -> SendOutcome {
        let stored = StreamMessage(stream: stream, from: from, to: to, at: Self.timestamp(), message: message)
        let text = try Self.encode(stored)
        return try await pool.write { db in
            guard let acl = try Self.acl(db, stream: stream, user: to) else { return .noStream }
            guard acl.publishers.contains(from) else { return .forbidden }
            try db.execute(
                sql: "INSERT INTO event (collection, id, version, entity) VALUES (?, ?, 0, ?)",
                arguments: [Self.logCollection(ofStream: stream), to, text]
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
