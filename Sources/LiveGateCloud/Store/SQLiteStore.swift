// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveCloudAPI
import LiveJSON
import LiveSQLite
import Logging
import ServiceLifecycle

/// Entities, streams and the durable event log, in one SQLite file (WAL): the default store, for one
/// instance. SQLite serializes writers, so commit order is sequence order, and `onCommit` runs right after
/// each commit (GRDB's `afterNextTransaction`).
///
/// Durability: `synchronous = FULL`, so a write is on disk (in the WAL, synced) before it is answered, and
/// survives a power loss, not only a crash of the process. Object writes share commits (``GroupCommit``),
/// which is what keeps that sync from bounding the write rate.
package final class SQLiteStore: CloudStore {
    let isShared = false
    let publishesAsItCommits = true
    package let pool: DatabasePool
    let onCommit: @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    /// How many events the log keeps; older ones are pruned (a subscriber resuming from before them is told to resync).
    let eventRetention: Int64
    /// A write's work inside a transaction: its outcome, and the events it logged (``logged(_:)``).
    package typealias Write = @Sendable (Database, inout [(seq: Int64, event: LoggedEvent)]) throws -> WriteOutcome
    let groupCommit: GroupCommit<Write, WriteOutcome>
    let queryIndexes: QueryIndexes
    let filteredCounts = FilteredCounts()
    /// Checkpoints the WAL beside the writer: for the application to run (``checkpointService``; without it,
    /// the writer checkpoints at ``WALCheckpointer/backstopPages``).
    let checkpointer: WALCheckpointer

    package init(
        path: String,
        eventRetention: Int64 = 100_000,
        logger: Logger = Logger(label: "livegate-cloud"),
        onCommit: @escaping @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    ) throws {
        var configuration = Configuration()
        configuration.label = "livegate-cloud.store"
        configuration.prepareDatabase { db in try db.execute(sql: WALCheckpointer.writerPragmas) }
        let pool = try DatabasePool(path: path, configuration: configuration)
        // On the open writer, not in `prepareDatabase`: GRDB's pool turns WAL on after that and sets the writer's
        // `synchronous` to `NORMAL` as it does, which syncs the WAL only at checkpoints (an answered write lost
        // to a power cut). `SQLiteStoreDurabilityTests` reads it back.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        self.pool = pool
        self.onCommit = onCommit
        self.eventRetention = max(eventRetention, 1)
        checkpointer = try WALCheckpointer(path: path, label: "livegate-cloud.checkpointer", logger: logger)
        pool.add(transactionObserver: checkpointer.commitObserver, extent: .databaseLifetime)
        groupCommit = GroupCommit { batch in await Self.commit(batch, in: pool, publish: onCommit) }
        try Self.migrator.migrate(pool)
        // The query indexes an earlier run made.
        queryIndexes = QueryIndexes(
            made: try pool.read { db in
                Set(
                    try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'lg\\_%' ESCAPE '\\'")
                        .compactMap(QueryIndexes.Index.init(name:))
                )
            }
        )
    }

    var writesCommitted: (transactions: Int, writes: Int) { groupCommit.committed }

    /// The WAL's checkpoints as a service of the cloud's application, until its graceful shutdown.
    var checkpointService: some Service { CheckpointService(checkpointer: checkpointer) }

    private struct CheckpointService: Service {
        let checkpointer: WALCheckpointer
        func run() async throws { await cancelWhenGracefulShutdown { await checkpointer.run() } }
    }

    func lastSeq() async throws -> Int64 {
        try await pool.read { db in try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'event'") ?? 0 }
    }

    func events(of topic: Topic, after: Int64, upTo: Int64) async throws -> (events: [(seq: Int64, event: LoggedEvent)], oldest: Int64?) {
        try await pool.read { db in
            let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(seq) FROM event")
            let (collections, id) = topic.logRows
            var condition = "collection IN (\(collections.map { _ in "?" }.joined(separator: ", ")))"
            var arguments = StatementArguments(collections)
            if let id {
                condition += " AND id = ?"
                arguments += [id]
            }
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT seq, collection, id, entity, previous FROM event WHERE \(condition) AND seq > ? AND seq <= ? ORDER BY seq",
                arguments: arguments + [after, upTo]
            )
            let events = try rows.map { row -> (seq: Int64, event: LoggedEvent) in
                (row["seq"], try LoggedEvent(collection: row["collection"], id: row["id"], text: row["entity"], previous: row["previous"]))
            }.filter { topic.filterQuery == nil || $0.event.concerns(topic) }
            return (events, oldest)
        }
    }

    func query(_ query: CollectionQuery, page: PageRequest, limit: Int) async throws -> QueryPage {
        let missing = queryIndexes.missing(for: query)
        if !missing.isEmpty {
            // Made once, by the first query that needs it (the writer builds it: about 0.1 s per 100,000
            // objects). One that cannot be made (a full disk) leaves the query to read without it.
            do {
                try await pool.write { db in
                    let present = Set(try Row.fetchAll(db, sql: "PRAGMA table_xinfo(entity)").map { $0["name"] as String })
                    for field in Set(missing.map(\.field)) where !present.contains(FieldColumns(field).marker) {
                        for statement in FieldColumns(field).adding { try db.execute(sql: statement) }
                    }
                    for index in missing { try db.execute(sql: FieldColumns(index.field).index(index.kind)) }
                }
                for index in missing { queryIndexes.made(index) }
            } catch {}
        }
        let sql = SQLiteQuerySQL(query, columned: queryIndexes.indexedFields(of: query))
        return try await pool.read { db in
            // Without a filter, the collection's live objects, kept by every write: no scan. With one, the count
            // kept since the collection's last write, or its matches counted (``FilteredCounts``).
            let count: Int
            if query.where.isEmpty {
                count = try Int.fetchOne(db, sql: "SELECT live FROM collection_size WHERE collection = ?", arguments: [query.collection]) ?? 0
            } else {
                let key = FilteredCounts.Key(query)
                let collectionSeq = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM event WHERE collection = ?", arguments: [query.collection])
                if let kept = filteredCounts.count(of: key, at: collectionSeq) {
                    count = kept
                } else {
                    count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entity WHERE \(sql.filter)", arguments: sql.filterArguments) ?? 0
                    filteredCounts.keep(count, of: key, at: collectionSeq)
                }
            }
            var condition = sql.filter
            var arguments = sql.filterArguments
            let (forward, beyond) = page.reading
            if let beyond {
                condition += " AND \(sql.comparison(after: forward))"
                arguments += sql.arguments(for: beyond)
            }
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT \(Self.entityColumns) FROM entity WHERE \(condition) ORDER BY \(sql.order(forward: forward)) LIMIT ?",
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
            // The same read transaction: the page is exactly the state after the log's events up to it.
            let seq = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM event")
            return QueryPage(items: items, count: count, nextCursor: nextCursor, previousCursor: previousCursor, seq: seq)
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
        migrator.registerMigration("v5-event-previous") { db in
            // The data before each write, so query topics hear of objects leaving them.
            try db.alter(table: "event") { table in table.add(column: "previous", .text) }
        }
        migrator.registerMigration("v6-tokens") { db in
            // Token grants, under the tokens' SHA-256, so a restarted instance honours the tokens it issued.
            try db.create(table: "token") { table in
                table.primaryKey("hash", .text)
                table.column("kind", .text).notNull()
                table.column("user", .text).notNull()
                table.column("expiresAt", .integer).notNull().indexed()
                table.column("pair", .text).notNull()
            }
        }
        migrator.registerMigration("v7-applied-writes") { db in
            // Writes applied under an Idempotency-Key, so a retried request is answered, not applied again.
            try db.create(table: "applied_write") { table in
                table.column("user", .text).notNull()
                table.column("key", .text).notNull()
                table.column("entity", .text).notNull()
                table.column("outcome", .text).notNull()
                table.column("at", .integer).notNull().indexed()
                table.primaryKey(["user", "key"])
            }
        }
        migrator.registerMigration("v8-collection-size") { db in
            // How many live (not deleted) objects each collection holds, kept by every write: a query without
            // a filter counts its result without scanning the collection.
            try db.create(table: "collection_size") { table in
                table.primaryKey("collection", .text)
                table.column("live", .integer).notNull()
            }
            try db.execute(
                sql: "INSERT INTO collection_size (collection, live) SELECT collection, COUNT(*) FROM entity WHERE deleted = 0 GROUP BY collection"
            )
        }
        migrator.registerMigration("v9-applied-write-fingerprint") { db in
            // The request each key was applied for (`IdempotencyKey.fingerprint`): the key with another request is 422.
            try db.alter(table: "applied_write") { table in table.add(column: "fingerprint", .text) }
        }
        return migrator
    }

    func get(_ key: EntityKey) async throws -> Entity? {
        try await pool.read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(Self.entityColumns) FROM entity WHERE collection = ? AND id = ?",
                arguments: [key.collection, key.id]
            ).map(Self.entity(from:))
        }
    }

    func get(_ keys: [EntityKey]) async throws -> (found: [EntityKey: Entity], seq: Int64?) {
        let byCollection = Dictionary(grouping: keys, by: \.collection)
        return try await pool.read { db in
            var found: [EntityKey: Entity] = [:]
            for (collection, keys) in byCollection {
                // SQLite takes at most 32,766 parameters a statement: a few hundred ids each.
                for start in stride(from: 0, to: keys.count, by: 500) {
                    let ids = keys[start..<min(start + 500, keys.count)].map(\.id)
                    let marks = Array(repeating: "?", count: ids.count).joined(separator: ",")
                    let rows = try Row.fetchAll(
                        db,
                        sql: "SELECT \(Self.entityColumns) FROM entity WHERE collection = ? AND id IN (\(marks))",
                        arguments: StatementArguments([collection] + ids)
                    )
                    for row in rows {
                        let entity = try Self.entity(from: row)
                        found[entity.key] = entity
                    }
                }
            }
            // The same read transaction: one snapshot of the objects and the log.
            // 0 before the first event: the log is pruned to its newest events, never to none.
            return (found, try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM event"))
        }
    }

    /// `confirmingGrant` is always `nil` here: no other instance shares the file, so this instance's grants
    /// are the truth (`AuthService`).
    func write(
        _ key: EntityKey,
        _ change: EntityChange,
        ifVersion: Int64?,
        idempotency: IdempotencyKey?,
        confirmingGrant: String?
    ) async throws -> WriteOutcome {
        let now = StoreText.timestamp()
        return try await groupCommit.submit { db, events -> WriteOutcome in
            if let idempotency,
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT entity, outcome, fingerprint FROM applied_write WHERE user = ? AND key = ?"),
                    arguments: [idempotency.user, idempotency.key]
                )
            {
                let entity = try CloudJSON.decode(Entity.self, from: row["entity"] as String)
                guard entity.key == key, idempotency.isSameRequest(as: row["fingerprint"]) else {
                    return .keyReused(idempotency.key, by: entity.key)
                }
                return IdempotencyKey.replayed(entity, outcome: row["outcome"])
            }
            let currentRow = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.entityColumns) FROM entity WHERE collection = ? AND id = ?"),
                arguments: [key.collection, key.id]
            )
            let current = try currentRow.map(Self.entity(from:))
            // The event's data before the write, as stored (not parsed and written again): none when the
            // object did not exist or was deleted (``LoggedEvent/previousText(of:)``).
            let previousText: String? = current.flatMap { $0.deleted ? nil : currentRow?[3] }
            let entity: Entity
            switch change.apply(to: current, key: key, ifVersion: ifVersion, now: now) {
            case .refuse(let outcome): return outcome
            case .store(let stored): entity = stored
            }
            // Statements prepared once per connection: compiling one (and GRDB's authorizer over it) cost more
            // than running it.
            try db.cachedStatement(
                sql: """
                    INSERT INTO entity (collection, id, version, data, createdAt, updatedAt, deleted)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (collection, id) DO UPDATE SET version = excluded.version, data = excluded.data,
                        createdAt = excluded.createdAt, updatedAt = excluded.updatedAt, deleted = excluded.deleted
                    """
            ).execute(
                arguments: [
                    key.collection, key.id, entity.version, try StoreText.encode(entity.data), entity.createdAt, entity.updatedAt,
                    entity.deleted,
                ]
            )
            let joined = (entity.deleted ? 0 : 1) - (current.map { $0.deleted ? 0 : 1 } ?? 0)
            if joined != 0 {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO collection_size (collection, live) VALUES (?, ?)
                        ON CONFLICT (collection) DO UPDATE SET live = live + excluded.live
                        """
                ).execute(arguments: [key.collection, joined])
            }
            try db.cachedStatement(sql: "INSERT INTO event (collection, id, version, entity, previous) VALUES (?, ?, ?, ?, ?)").execute(
                arguments: [key.collection, key.id, entity.version, try StoreText.encode(entity), previousText]
            )
            let event = LoggedEvent.entity(entity, previous: current.flatMap { $0.deleted ? nil : $0.data })
            let seq = try self.logged(db)
            events.append((seq, event))
            let outcome = EntityChange.outcome(storing: entity, over: current)
            if let idempotency, let applied = outcome.applied {
                let now = StoreText.milliseconds()
                if seq % 64 == 0 {
                    try db.execute(sql: "DELETE FROM applied_write WHERE at < ?", arguments: [now - IdempotencyKey.retentionMilliseconds])
                }
                try db.cachedStatement(sql: "INSERT INTO applied_write (user, key, entity, outcome, at, fingerprint) VALUES (?, ?, ?, ?, ?, ?)")
                    .execute(
                        arguments: [
                            idempotency.user, idempotency.key, try StoreText.encode(applied.entity), applied.outcome, now, idempotency.fingerprint,
                        ]
                    )
            }
            return outcome
        }
    }

    package func close() throws {
        try checkpointer.close()  // first: the pool's connections are then the last, and SQLite checkpoints as they close
        try pool.close()
    }

    /// Applies a batch of writes in one transaction (see ``GroupCommit``); the events of those applied are
    /// published in order right after the commit, before the next transaction starts.
    ///
    /// A write whose work throws (a storage error, a value that does not encode) must be rolled back alone.
    /// Writes rarely throw, so the batch first runs as one transaction with no savepoints (a savepoint and its
    /// release were two statements more a write); if a write throws, that transaction is rolled back and the
    /// batch runs again with each write in a savepoint of its own. The writes read and decide again from the
    /// store, so the second run answers them as the first would have.
    package static func commit(
        _ batch: [Write],
        in pool: DatabasePool,
        publish: @escaping @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    ) async -> [Result<WriteOutcome, any Error>] {
        do {
            return try await pool.write { db in try apply(batch, in: db, savepoints: false, publish: publish) }
        } catch is WriteThrew {
            do {
                return try await pool.write { db in try apply(batch, in: db, savepoints: true, publish: publish) }
            } catch {
                return Array(repeating: .failure(error), count: batch.count)
            }
        } catch {
            return Array(repeating: .failure(error), count: batch.count)
        }
    }

    /// Thrown out of a batch's transaction without savepoints when one of its writes throws: run it again with them.
    private struct WriteThrew: Error {}

    private static func apply(
        _ batch: [Write],
        in db: Database,
        savepoints: Bool,
        publish: @escaping @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    ) throws -> [Result<WriteOutcome, any Error>] {
        var results: [Result<WriteOutcome, any Error>] = []
        var published: [(seq: Int64, event: LoggedEvent)] = []
        for write in batch {
            var events: [(seq: Int64, event: LoggedEvent)] = []
            var result: Result<WriteOutcome, any Error> = .failure(CancellationError())
            if savepoints {
                try db.inSavepoint {
                    do {
                        result = .success(try write(db, &events))
                        return .commit
                    } catch {
                        result = .failure(error)
                        return .rollback
                    }
                }
            } else {
                do {
                    result = .success(try write(db, &events))
                } catch {
                    throw WriteThrew()
                }
            }
            if case .success = result { published += events }
            results.append(result)
        }
        if !published.isEmpty {
            let events = published
            db.afterNextTransaction(onCommit: { _ in
                for (seq, event) in events { publish(seq, event) }
            })
        }
        return results
    }

    /// After an event row was inserted: its sequence number, and `onCommit` called once the transaction commits.
    func appended(_ db: Database, _ event: LoggedEvent) throws -> Int64 {
        let seq = try logged(db)
        db.afterNextTransaction(onCommit: { [onCommit] _ in onCommit(seq, event) })
        return seq
    }

    /// After an event row was inserted: its sequence number, and the log pruned now and then. Whoever
    /// commits the transaction publishes the event (``appended(_:_:)``, or the group commit).
    func logged(_ db: Database) throws -> Int64 {
        let seq = db.lastInsertedRowID
        if seq % 64 == 0 {
            // Keep the log bounded: every 64 events, drop what is past the retention.
            try db.execute(sql: "DELETE FROM event WHERE seq <= ?", arguments: [seq - eventRetention])
        }
        return seq
    }

    /// An entity's columns (not the generated ones a query index adds, see ``FieldColumns``).
    static let entityColumns = "collection, id, version, data, createdAt, updatedAt, deleted"

    /// An entity from a row of ``entityColumns``, read by position (by name, GRDB lowercases the name at each
    /// read to find it).
    private static func entity(from row: Row) throws -> Entity {
        let text: String = row[3]
        return Entity(
            collection: row[0],
            id: row[1],
            version: row[2],
            data: try StoreText.value(text),
            createdAt: row[4],
            updatedAt: row[5],
            deleted: row[6]
        )
    }
}
