// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import PostgresNIO

/// Entities, streams and the durable event log in PostgreSQL, which several `livegate-cloud` instances may
/// share: each delivers the realtime events of all.
///
/// Ordering. Every transaction that appends to the log first takes one advisory lock
/// (`pg_advisory_xact_lock`, released by its commit or rollback), so sequence numbers are given out and
/// committed in the same order: when seq N is visible, every lower seq that will ever commit is visible too.
/// That serializes writers as SQLite does, and it is what lets any instance publish the log in order.
///
/// Publishing. A transaction that appends an event also sends `NOTIFY livegate_events` (delivered on
/// commit). Each instance's ``runEventPump(after:skip:publish:)`` listens, and on every notification reads the log
/// after the last seq it published and hands each event to the hub in order — its own writes and the
/// other instances' alike, one path for both. After (re)connecting it reads what it missed before
/// listening again, so a dropped database connection delays events but loses none.
final class PostgresStore: CloudStore {
    let isShared = true
    let publishesAsItCommits = false
    let client: PostgresClient
    let logger: Logger
    /// How many events the log keeps; older ones are pruned (a subscriber resuming from before them is told to resync).
    let eventRetention: Int64
    /// The channel `NOTIFY` wakes the event pumps on.
    static let channel = "livegate_events"
    /// The advisory lock every log-appending transaction holds ("livegate").
    static let writeLock: Int64 = 0x6c69_7665_6761_7465

    /// Object writes share transactions (``GroupCommit``, ``PostgresBatchWriter``).
    let groupCommit: GroupCommit<PostgresBatchWriter.PendingWrite, WriteOutcome>
    let queryIndexes: QueryIndexes
    let filteredCounts = FilteredCounts()

    /// Opens the store on a running client (`client.run()` must be going), applying missing migrations.
    /// Object writes go through `writeLane` when given (its `run()` must be going too), else through `client`.
    init(client: PostgresClient, writeLane: PostgresWriteLane? = nil, eventRetention: Int64 = 100_000, logger: Logger) async throws {
        self.client = client
        self.logger = logger
        self.eventRetention = max(eventRetention, 1)
        let writer = PostgresBatchWriter(client: writeLane?.client ?? client, logger: logger, eventRetention: max(eventRetention, 1))
        groupCommit = GroupCommit(executor: writeLane?.executor) { batch in await writer.commit(batch) }
        try await PostgresSchema.migrate(client, logger: logger)
        // The query indexes made before (by this instance's earlier runs, or by another).
        var made: Set<QueryIndexes.Index> = []
        let names = try await client.query(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'entity' AND indexname LIKE 'lg\\_%'",
            logger: logger
        )
        for try await name in names.decode(String.self) {
            if let index = QueryIndexes.Index(name: name) { made.insert(index) }
        }
        queryIndexes = QueryIndexes(made: made)
    }

    var writesCommitted: (transactions: Int, writes: Int) { groupCommit.committed }

    func lastSeq() async throws -> Int64 {
        try await single(Int64.self, "SELECT coalesce(max(seq), 0)::bigint FROM event") ?? 0
    }

    func events(of topic: Topic, after: Int64, upTo: Int64) async throws -> (events: [(seq: Int64, event: LoggedEvent)], oldest: Int64?) {
        let (collections, id) = topic.logRows
        // One snapshot for the rows and the log's oldest seq.
        return try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: logger)
            var oldest: Int64?
            for try await value in try await connection.query("SELECT min(seq) FROM event", logger: logger).decode(Int64?.self) {
                oldest = value
            }
            var statement = PostgresStatement("SELECT seq, collection, id, entity, previous FROM event WHERE ")
            statement.append("collection = ANY(\(statement.bind(collections)))")
            if let id { statement.append(" AND id = \(statement.bind(id))") }
            statement.append(" AND seq > \(statement.bind(after)) AND seq <= \(statement.bind(upTo)) ORDER BY seq")
            let rows = try await connection.query(statement.query, logger: logger)
            var events: [(seq: Int64, event: LoggedEvent)] = []
            for try await (seq, collection, id, text, previous) in rows.decode((Int64, String, String, String, String?).self) {
                let event = try LoggedEvent(collection: collection, id: id, text: text, previous: previous)
                if topic.filterQuery == nil || event.concerns(topic) { events.append((seq, event)) }
            }
            return (events, oldest)
        }
    }

    func query(_ query: CollectionQuery, page: PageRequest, limit: Int) async throws -> QueryPage {
        let sql = PostgresQuerySQL(query: query)
        let missing = queryIndexes.missing(for: query)
        for index in missing {
            // Made once, by the first query that needs it (writes wait while it is built). Another instance
            // making the same index at once may make this one fail: this query reads without it, the next
            // tries again.
            do {
                try await client.query(PostgresQuery(unsafeSQL: PostgresQuerySQL.index(index.kind, index.field)), logger: logger)
                queryIndexes.made(index)
            } catch {
                logger.warning("a query index could not be made; the query reads without it", metadata: ["index": "\(index)", "error": "\(error)"])
            }
        }
        if !missing.isEmpty {
            // The planner knows how selective an index's expressions are only once they are analyzed (until
            // then it guesses a filter matches a few rows, and sorts a third of the collection for a page).
            do {
                try await client.query("ANALYZE entity", logger: logger)
            } catch {
                logger.warning("analyzing the objects after making a query index failed", metadata: ["error": "\(error)"])
            }
        }
        // One statement, so one snapshot and one round trip: the count, the log's last seq, whether items lie
        // on the cursor's side of the page, and the page with one item more (whether items follow it).
        let (forward, beyond) = page.reading
        var statement = PostgresStatement("SELECT c.n, s.seq, o.other, ")
        statement.append("p.collection, p.id, p.version, p.data, p.created_at, p.updated_at, p.deleted FROM ")
        statement.append("(SELECT max(seq) FROM event) AS s(seq) CROSS JOIN LATERAL (")
        let countKey = FilteredCounts.Key(query)
        if query.where.isEmpty {
            // The collection's live objects, kept by every write: no scan.
            statement.append("SELECT coalesce((SELECT live FROM collection_size WHERE collection = \(statement.bind(query.collection))), 0)")
        } else if let kept = filteredCounts.kept(for: countKey) {
            // The count kept while the log's last event is the one it was counted at (the count, in the `ELSE`, is
            // only run when not: ``FilteredCounts``). The log's, not the collection's: the planner reads a
            // collection's `max(seq)` backward along the primary key when the collection is frequent in the log,
            // through every later event when its last write is old.
            statement.append(
                "SELECT CASE WHEN s.seq = \(statement.bind(kept.seq)) THEN \(statement.bind(kept.count)) ELSE (SELECT count(*) FROM entity WHERE "
            )
            sql.filter(&statement)
            statement.append(") END")
        } else {
            statement.append("SELECT count(*) FROM entity WHERE ")
            sql.filter(&statement)
        }
        statement.append(") AS c(n) CROSS JOIN (SELECT ")
        if let beyond {
            // Reading after a cursor, items precede the page when any lies at or before the cursor (the page's
            // first item is the first after it); reading before one, items follow when any lies at or after it.
            // Ordered from the cursor outwards, so the index finds the nearest at once.
            statement.append("coalesce((SELECT true FROM entity WHERE ")
            sql.filter(&statement)
            statement.append(" AND ")
            sql.comparison(after: !forward, beyond, inclusive: true, &statement)
            statement.append(" ORDER BY \(sql.order(forward: !forward)) LIMIT 1), false)")
        } else {
            statement.append("false")
        }
        statement.append(") AS o(other) LEFT JOIN LATERAL (SELECT \(Self.entityColumns) FROM entity WHERE ")
        sql.filter(&statement)
        if let beyond {
            statement.append(" AND ")
            sql.comparison(after: forward, beyond, &statement)
        }
        statement.append(" ORDER BY \(sql.order(forward: forward)) LIMIT \(statement.bind(limit + 1))) AS p ON true")
        var count = 0
        var seq: Int64?
        var other = false
        var items: [Entity] = []
        let rows = try await client.query(statement.query, logger: logger)
        for try await (n, last, beyondSide, collection, id, version, data, createdAt, updatedAt, deleted) in rows.decode(
            (Int, Int64?, Bool, String?, String?, Int64?, String?, String?, String?, Bool?).self
        ) {
            (count, seq, other) = (n, last, beyondSide)
            guard let collection, let id, let version, let data, let createdAt, let updatedAt, let deleted else { continue }
            items.append(try Self.entity(collection, id, version, data, createdAt, updatedAt, deleted))
        }
        if !query.where.isEmpty { filteredCounts.keep(count, of: countKey, at: seq) }
        let more = items.count > limit
        if more { items.removeLast() }
        if !forward { items.reverse() }
        var nextCursor: String?
        var previousCursor: String?
        if let last = items.last, forward ? more : other { nextCursor = query.position(of: last).cursor }
        if let first = items.first, forward ? other : more { previousCursor = query.position(of: first).cursor }
        return QueryPage(items: items, count: count, nextCursor: nextCursor, previousCursor: previousCursor, seq: seq)
    }

    func get(_ key: EntityKey) async throws -> Entity? {
        try await Self.entities(
            try await client.query(
                "SELECT \(unescaped: Self.entityColumns) FROM entity WHERE collection = \(key.collection) AND id = \(key.id)",
                logger: logger
            )
        ).first
    }

    func get(_ keys: [EntityKey]) async throws -> (found: [EntityKey: Entity], seq: Int64?) {
        // One statement, one snapshot of the objects and the log: the keys as two parallel arrays, joined to the
        // log's last seq (a row with no entity when none of the keys exists; 0 before the first event: the log is
        // pruned to its newest events, never to none, so an empty log has had none).
        let collections = keys.map(\.collection)
        let ids = keys.map(\.id)
        let rows = try await client.query(
            """
            SELECT s.seq, e.collection, e.id, e.version, e.data::text, e.created_at, e.updated_at, e.deleted
            FROM (SELECT coalesce(max(seq), 0)::bigint FROM event) AS s(seq)
            LEFT JOIN entity e ON (e.collection, e.id) IN (SELECT * FROM unnest(\(collections)::text[], \(ids)::text[]))
            """,
            logger: logger
        )
        var found: [EntityKey: Entity] = [:]
        var seq: Int64?
        for try await (logSeq, collection, id, version, data, createdAt, updatedAt, deleted) in rows.decode(
            (Int64?, String?, String?, Int64?, String?, String?, String?, Bool?).self
        ) {
            seq = logSeq
            guard let collection, let id, let version, let data, let createdAt, let updatedAt, let deleted else { continue }
            let entity = try Self.entity(collection, id, version, data, createdAt, updatedAt, deleted)
            found[entity.key] = entity
        }
        return (found, seq)
    }

    func write(
        _ key: EntityKey,
        _ change: EntityChange,
        ifVersion: Int64?,
        idempotency: IdempotencyKey?,
        confirmingGrant: String?
    ) async throws -> WriteOutcome {
        try await groupCommit.submit(
            PostgresBatchWriter.PendingWrite(
                key: key,
                change: change,
                ifVersion: ifVersion,
                idempotency: idempotency,
                grant: confirmingGrant,
                now: StoreText.timestamp()
            )
        )
    }

    /// Appends an event row inside a transaction that holds `writeLock`: its seq, the `NOTIFY` that wakes
    /// the pumps at commit, and the log pruned now and then.
    func append(
        _ connection: PostgresConnection,
        collection: String,
        id: String,
        version: Int64,
        text: String,
        previous: String? = nil
    ) async throws -> Int64 {
        var seq: Int64 = 0
        let inserted = try await connection.query(
            "INSERT INTO event (collection, id, version, entity, previous) VALUES (\(collection), \(id), \(version), \(text), \(previous)) RETURNING seq",
            logger: logger
        )
        for try await value in inserted.decode(Int64.self) { seq = value }
        try await connection.query("SELECT pg_notify(\(Self.channel), \(String(seq)))", logger: logger)
        if seq % 64 == 0 {
            // Keep the log bounded: every 64 events, drop what is past the retention.
            try await connection.query("DELETE FROM event WHERE seq <= \(seq - eventRetention)", logger: logger)
        }
        return seq
    }

    /// Publishes every event committed after seq `after`, in order, for as long as the task runs: listens
    /// on `channel`, and reads the log after the last seq published whenever woken (and once after each
    /// (re)connection), after `pause` (fault injection: a pump behind the commits). Reconnects after a lost
    /// database connection, a second apart.
    func runEventPump(
        after: Int64,
        pause: @Sendable () async -> Void = {},
        skip: @Sendable (_ seq: Int64, _ collection: String, _ id: String) -> Bool,
        publish: @Sendable (_ seq: Int64, _ event: LoggedEvent) -> Void
    ) async {
        var last = after
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        last = try await publishEvents(after: last, skip, publish)
                        for try await _ in notifications {
                            await pause()
                            last = try await publishEvents(after: last, skip, publish)
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("lost the PostgreSQL notification listener; reconnecting", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Publishes the log's events after `seq`, in order; returns the last seq published. An event `skip` takes
    /// (nobody listens to it) is not decoded: not its texts either (two strings of ~300-500 bytes a write, made and
    /// checked as UTF-8 by every instance for every write, when only the topic is needed to skip it).
    private func publishEvents(
        after seq: Int64,
        _ skip: (_ seq: Int64, _ collection: String, _ id: String) -> Bool,
        _ publish: (_ seq: Int64, _ event: LoggedEvent) -> Void
    ) async throws -> Int64 {
        var last = seq
        while true {
            let rows = try await client.query(
                "SELECT seq, collection, id, entity, previous FROM event WHERE seq > \(last) ORDER BY seq LIMIT 1000",
                logger: logger
            )
            var read = 0
            for try await row in rows {
                var cells = row.makeIterator()
                guard let seqCell = cells.next(), let collectionCell = cells.next(), let idCell = cells.next(),
                    let textCell = cells.next(), let previousCell = cells.next()
                else { throw PostgresStoreError("an event row of the log has fewer than its five columns") }
                let (seq, collection, id) = (try seqCell.decode(Int64.self), try collectionCell.decode(String.self), try idCell.decode(String.self))
                read += 1
                last = seq
                if skip(seq, collection, id) { continue }
                let (text, previous) = (try textCell.decode(String.self), try previousCell.decode(String?.self))
                do {
                    publish(seq, try LoggedEvent(collection: collection, id: id, text: text, previous: previous))
                } catch {
                    logger.error("an event in the log does not decode; skipped", metadata: ["seq": "\(seq)", "error": "\(error)"])
                }
            }
            if read < 1000 { return last }
        }
    }

    // MARK: Rows

    static let entityColumns = "collection, id, version, data::text, created_at, updated_at, deleted"

    static func entities(_ rows: PostgresRowSequence) async throws -> [Entity] {
        var entities: [Entity] = []
        for try await (collection, id, version, data, createdAt, updatedAt, deleted) in rows.decode(
            (String, String, Int64, String, String, String, Bool).self
        ) {
            entities.append(try entity(collection, id, version, data, createdAt, updatedAt, deleted))
        }
        return entities
    }

    /// An entity from its columns (`entityColumns`, the data as text).
    static func entity(
        _ collection: String,
        _ id: String,
        _ version: Int64,
        _ data: String,
        _ createdAt: String,
        _ updatedAt: String,
        _ deleted: Bool
    ) throws -> Entity {
        Entity(
            collection: collection,
            id: id,
            version: version,
            data: try StoreText.value(data),
            createdAt: createdAt,
            updatedAt: updatedAt,
            deleted: deleted
        )
    }

    /// The first column of the first row of a query, if any.
    func single<Value: PostgresDecodable & Sendable>(_ type: Value.Type, _ query: PostgresQuery) async throws -> Value? {
        for try await value in try await client.query(query, logger: logger).decode(Value.self) { return value }
        return nil
    }
}
