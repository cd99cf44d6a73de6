// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON

/// What the event log holds: a write of an entity, or a message sent on a stream.
enum LoggedEvent: Sendable, Equatable {
    case entity(Entity)
    case message(StreamMessage)

    /// The topics that hear of it.
    var topics: [Topic] {
        switch self {
        case .entity(let entity): [.object(entity.key), .collection(entity.collection)]
        case .message(let message): [.stream(message.stream, user: message.to)]
        }
    }

    func serverMessage(seq: Int64, topic: Topic) -> RealtimeServerMessage {
        switch self {
        case .entity(let entity): .event(seq: seq, topic: topic, entity: entity)
        case .message(let message): .event(seq: seq, topic: topic, message: message)
        }
    }
}

/// Entities, streams and the durable event log, in one SQLite file (WAL).
///
/// Every write and every stream message appends an event with a global sequence number in the same
/// transaction, and the event is handed to `onCommit` only after the commit, in commit order, so subscribers
/// never see a write that was rolled back and never see two events out of order.
///
/// A stream message's log row has `collection` = `$stream/<stream>` (never a valid collection name), `id` =
/// the recipient, `version` = 0 and the message as its `entity` text.
final class EntityStore: Sendable {
    let pool: DatabasePool
    let onCommit: @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    /// How many events the log keeps; older ones are pruned (a subscriber resuming from before them is told to resync).
    let eventRetention: Int64

    init(path: String, eventRetention: Int64 = 100_000, onCommit: @escaping @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void) throws {
        var configuration = Configuration()
        configuration.label = "livegate-cloud.store"
        pool = try DatabasePool(path: path, configuration: configuration)
        self.onCommit = onCommit
        self.eventRetention = max(eventRetention, 1)
        try Self.migrator.migrate(pool)
    }

    /// The sequence number of the last event written (0 when none was).
    func lastSeq() throws -> Int64 {
        try pool.read { db in try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'event'") ?? 0 }
    }

    /// The log row's `collection` for messages of a stream.
    static func logCollection(ofStream stream: String) -> String { "$stream/" + stream }

    /// The events of a topic (one object, a whole collection, or a user's messages on a stream) with
    /// `after < seq <= upTo`, in order, and the oldest sequence number the log still holds (`nil` when it holds none).
    func events(of topic: Topic, after: Int64, upTo: Int64) async throws -> (events: [(seq: Int64, event: LoggedEvent)], oldest: Int64?) {
        try await pool.read { db in
            let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(seq) FROM event")
            let rows: [Row]
            switch topic {
            case .object(let key):
                rows = try Row.fetchAll(
                    db,
                    sql: "SELECT seq, entity FROM event WHERE collection = ? AND id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                    arguments: [key.collection, key.id, after, upTo]
                )
            case .collection(let collection):
                rows = try Row.fetchAll(
                    db,
                    sql: "SELECT seq, entity FROM event WHERE collection = ? AND seq > ? AND seq <= ? ORDER BY seq",
                    arguments: [collection, after, upTo]
                )
            case .stream(let stream, let user):
                rows = try Row.fetchAll(
                    db,
                    sql: "SELECT seq, entity FROM event WHERE collection = ? AND id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                    arguments: [Self.logCollection(ofStream: stream), user, after, upTo]
                )
            }
            let events = try rows.map { row -> (seq: Int64, event: LoggedEvent) in
                let text: String = row["entity"]
                let event: LoggedEvent =
                    if case .stream = topic {
                        .message(try JSONDecoder().decode(StreamMessage.self, from: Data(text.utf8)))
                    } else {
                        .entity(try JSONDecoder().decode(Entity.self, from: Data(text.utf8)))
                    }
                return (row["seq"], event)
            }
            return (events, oldest)
        }
    }

    /// One page of a query's result, with the total count and the cursors around it (see `CollectionQuery`
    /// for the order, which the SQL here must follow exactly).
    func query(_ query: CollectionQuery, page: PageRequest, limit: Int) async throws -> QueryPage {
        let sql = QuerySQL(query)
        return try await pool.read { db in
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entity WHERE \(sql.filter)", arguments: sql.filterArguments) ?? 0
            var condition = sql.filter
            var arguments = sql.filterArguments
            let forward: Bool
            switch page {
            case .first, .last:
                forward = page == .first
            case .after(let position):
                forward = true
                condition += " AND \(sql.comparison(after: true))"
                arguments += sql.arguments(for: position)
            case .before(let position):
                forward = false
                condition += " AND \(sql.comparison(after: false))"
                arguments += sql.arguments(for: position)
            }
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT * FROM entity WHERE \(condition) ORDER BY \(sql.order(forward: forward)) LIMIT ?",
                arguments: arguments + [limit]
            )
            var items = try rows.map(Self.entity(from:))
            if !forward { items.reverse() }
            func exists(_ after: Bool, _ entity: Entity) throws -> Bool {
                try Bool.fetchOne(
                    db,
                    sql: "SELECT EXISTS (SELECT 1 FROM entity WHERE \(sql.filter) AND \(sql.comparison(after: after)))",
                    arguments: sql.filterArguments + sql.arguments(for: query.position(of: entity))
                ) ?? false
            }
            var nextCursor: String?
            var previousCursor: String?
            if let last = items.last, try exists(true, last) { nextCursor = query.position(of: last).cursor }
            if let first = items.first, try exists(false, first) { previousCursor = query.position(of: first).cursor }
            return QueryPage(items: items, count: count, nextCursor: nextCursor, previousCursor: previousCursor)
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "entity") { table in
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.column("data", .text).notNull()
                table.column("createdAt", .text).notNull()
                table.column("updatedAt", .text).notNull()
                table.column("deleted", .boolean).notNull().defaults(to: false)
                table.primaryKey(["collection", "id"])
            }
            try db.create(table: "event") { table in
                table.autoIncrementedPrimaryKey("seq")
                table.column("collection", .text).notNull()
                table.column("id", .text).notNull()
                table.column("version", .integer).notNull()
                table.column("entity", .text).notNull()
            }
        }
        migrator.registerMigration("v2-event-by-object") { db in
            try db.create(index: "event_by_object", on: "event", columns: ["collection", "id", "seq"])
        }
        migrator.registerMigration("v3-event-by-collection") { db in
            try db.create(index: "event_by_collection", on: "event", columns: ["collection", "seq"])
        }
        migrator.registerMigration("v4-streams") { db in
            try db.create(table: "stream") { table in
                table.primaryKey("name", .text)
                table.column("createdAt", .text).notNull()
            }
            try db.create(table: "stream_acl") { table in
                table.column("stream", .text).notNull().references("stream", onDelete: .cascade)
                table.column("user", .text).notNull()
                table.column("acl", .text).notNull()
                table.primaryKey(["stream", "user"])
            }
        }
        return migrator
    }

    func get(_ key: EntityKey) async throws -> Entity? {
        try await pool.read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM entity WHERE collection = ? AND id = ?",
                arguments: [key.collection, key.id]
            ).map(Self.entity(from:))
        }
    }

    /// What a write does to an object.
    enum Change: Sendable {
        /// Create or replace the data.
        case replace(JSONValue)
        /// Merge a JSON merge patch (RFC 7386) into the existing data.
        case merge(JSONValue)
        /// Delete: the entity becomes a tombstone (no data, `deleted: true`) with the next version.
        case delete
    }

    enum WriteOutcome: Sendable {
        case created(Entity)
        case updated(Entity)
        case deleted(Entity)
        /// `merge` or `delete` of an object that does not exist (or is already deleted).
        case notFound
        case conflict(currentVersion: Int64)
    }

    /// Writes one object; with `ifVersion`, only if the stored version is exactly that (0: "does not
    /// exist"). Versions grow by one with every write, deletions and re-creations included.
    func write(_ key: EntityKey, _ change: Change, ifVersion: Int64?) async throws -> WriteOutcome {
        let now = Self.timestamp()
        return try await pool.write { db -> WriteOutcome in
            let current = try Row.fetchOne(
                db,
                sql: "SELECT * FROM entity WHERE collection = ? AND id = ?",
                arguments: [key.collection, key.id]
            ).map(Self.entity(from:))
            let currentVersion = current?.version ?? 0
            let existing = current.flatMap { $0.deleted ? nil : $0 }
            if let ifVersion, ifVersion != (existing?.version ?? 0) {
                return .conflict(currentVersion: existing?.version ?? 0)
            }
            let data: JSONValue
            switch change {
            case .replace(let replacement):
                data = replacement
            case .merge(let patch):
                guard let existing else { return .notFound }
                data = existing.data.merging(patch: patch)
            case .delete:
                guard existing != nil else { return .notFound }
                data = .object([:])
            }
            let deleted: Bool
            if case .delete = change { deleted = true } else { deleted = false }
            let entity = Entity(
                collection: key.collection,
                id: key.id,
                version: currentVersion + 1,
                data: data,
                createdAt: existing?.createdAt ?? now,
                updatedAt: now,
                deleted: deleted
            )
            try db.execute(
                sql: """
                    INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (collection, id) DO UPDATE SET version = excluded.version, data = excluded.data,
                        createdAt = excluded.createdAt, updatedAt = excluded.updatedAt, deleted = excluded.deleted
                    """,
                arguments: [
                    key.collection, key.id, entity.version, try Self.encode(entity.data), entity.createdAt, entity.updatedAt,
                    entity.deleted,
                ]
            )
            try db.execute(
                sql: "INSERT INTO event (collection, id, version, entity) VALUES (?, ?, ?, ?)",
                arguments: [key.collection, key.id, entity.version, try Self.encode(entity)]
            )
            _ = try self.appended(db, .entity(entity))
            if deleted { return .deleted(entity) }
            return existing == nil ? .created(entity) : .updated(entity)
        }
    }

    func close() throws { try pool.close() }

    /// After an event row was inserted: its sequence number, the log pruned now and then, and `onCommit`
    /// called once the transaction commits.
    func appended(_ db: Database, _ event: LoggedEvent) throws -> Int64 {
        let seq = db.lastInsertedRowID
        if seq % 64 == 0 {
            // Keep the log bounded: every 64 events, drop what is past the retention.
            try db.execute(sql: "DELETE FROM event WHERE seq <= ?", arguments: [seq - eventRetention])
        }
        db.afterNextTransaction(onCommit: { [onCommit] _ in onCommit(seq, event) })
        return seq
    }

    private static func entity(from row: Row) throws -> Entity {
        let text: String = row["data"]
        return Entity(
            collection: row["collection"],
            id: row["id"],
            version: row["version"],
            data: try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)),
            createdAt: row["createdAt"],
            updatedAt: row["updatedAt"],
            deleted: row["deleted"]
        )
    }

    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp(_ date: Date = Date()) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
