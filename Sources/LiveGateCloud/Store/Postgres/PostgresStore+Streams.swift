// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import PostgresNIO

/// Streams, their per-user ACLs, and their messages (which go into the event log like writes do).
extension PostgresStore {
    func createStream(_ name: String) async throws -> Bool {
        let created = try await client.query(
            "INSERT INTO stream (name, created_at) VALUES (\(name), \(StoreText.timestamp())) ON CONFLICT (name) DO NOTHING RETURNING name",
            logger: logger
        )
        var made = false
        for try await _ in created.decode(String.self) { made = true }
        return made
    }

    func streamNames() async throws -> [String] {
        var names: [String] = []
        for try await name in try await client.query("SELECT name FROM stream ORDER BY name COLLATE \"C\"", logger: logger).decode(String.self) {
            names.append(name)
        }
        return names
    }

    func acl(stream: String, user: String) async throws -> StreamACL? {
        try await client.withConnection { connection in try await Self.acl(connection, stream: stream, user: user, logger: logger) }
    }

    func setACL(_ acl: StreamACL, stream: String, user: String) async throws -> Bool {
        let text = try StoreText.encode(acl)
        return try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.writeLock))", logger: logger)
            let set = try await connection.query(
                """
                INSERT INTO stream_acl (stream, username, acl) SELECT name, \(user), \(text) FROM stream WHERE name = \(stream)
                ON CONFLICT (stream, username) DO UPDATE SET acl = excluded.acl RETURNING stream
                """,
                logger: logger
            )
            var found = false
            for try await _ in set.decode(String.self) { found = true }
            guard found else { return false }
            // In the log too, so every instance ends the subscriptions the new ACL no longer allows.
            _ = try await append(connection, collection: LoggedEvent.logCollection(ofACLsOf: stream), id: user, version: 0, text: text)
            return true
        }
    }

    func send(_ message: JSONValue, stream: String, from: String, to: String) async throws -> StreamSendOutcome {
        let stored = StreamMessage(stream: stream, from: from, to: to, at: StoreText.timestamp(), message: message)
        let text = try StoreText.encode(stored)
        return try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.writeLock))", logger: logger)
            guard let acl = try await Self.acl(connection, stream: stream, user: to, logger: logger) else { return .noStream }
            guard acl.publishers.contains(from) else { return .forbidden }
            let seq = try await append(connection, collection: LoggedEvent.logCollection(ofStream: stream), id: to, version: 0, text: text)
            return .sent(SentStreamMessage(seq: seq, message: stored))
        }
    }

    private static func acl(_ connection: PostgresConnection, stream: String, user: String, logger: Logger) async throws -> StreamACL? {
        let rows = try await connection.query(
            "SELECT a.acl FROM stream s LEFT JOIN stream_acl a ON a.stream = s.name AND a.username = \(user) WHERE s.name = \(stream)",
            logger: logger
        )
        for try await text in rows.decode(String?.self) {
            guard let text else { return StreamACL() }
            return try JSONDecoder().decode(StreamACL.self, from: Data(text.utf8))
        }
        return nil
    }
}
