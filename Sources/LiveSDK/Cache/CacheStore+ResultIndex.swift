// Licensed under the Apache License, Version 2.0.

import GRDB
import LiveCloudAPI
import LiveJSON

/// A query's result by position, in the cache: `resultItem` holds the ids of its first `filled` items in
/// order, each with the value of the sort field it was placed by (the entities are in the entity table),
/// `resultIndex` how far that reaches, whether it is the whole result, and the result's count. Read by
/// position with SQL, so the result is never held in memory.
///
/// The index is kept sorted by the values it stores, not by the cache's entities: a change is in the cache
/// before it is applied to the index (a batch of realtime events is stored, then applied one by one), so while
/// it waits, the cache's copy of an item may sort elsewhere than the item's place. A place searched by the
/// cache's copies then lands wrong and stays wrong once that change moves its item; searched by the stored
/// values, each change lands where it belongs among the others as placed, and the index is the result once
/// every change is applied.
extension CacheStore {
    static func createResultIndexTables(_ db: Database) throws {
        try db.create(table: "resultIndex") { table in
            table.primaryKey("query", .text)
            table.column("filled", .integer).notNull()
            table.column("complete", .boolean).notNull()
            table.column("count", .integer).notNull()
        }
        // No unique key on (query, position): shifting a range by one would collide mid-update.
        try db.create(table: "resultItem") { table in
            table.column("query", .text).notNull()
            table.column("position", .integer).notNull()
            table.column("id", .text).notNull()
        }
        try db.create(index: "resultItemByPosition", on: "resultItem", columns: ["query", "position"])
        try db.create(index: "resultItemById", on: "resultItem", columns: ["query", "id"])
    }

    /// The value each item was placed by (`v10-result-item-sort-value`). An index is emptied when it opens, so
    /// the items of a cache made before (which have none) are dropped with it.
    static func addResultItemSortValues(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM resultItem")
        try db.execute(sql: "DELETE FROM resultIndex")
        try db.alter(table: "resultItem") { table in table.add(column: "sortValue", .text) }
    }

    /// How far a result index reaches.
    struct ResultIndexState: Sendable, Equatable {
        /// Items known from the first, in order.
        var filled: Int
        /// Whether they are the whole result.
        var complete: Bool
        /// How many items match the query in all (the cloud's count, adjusted by the changes applied).
        var count: Int
    }

    /// What applying a change to a result index found.
    enum ResultIndexChange: Sendable {
        case applied
        /// An entity of the index is no longer cached (evicted): the index must be filled again.
        case entityMissing
    }

    /// Empties the index of `query` (its items are filled again from the cloud, from the first).
    func resetResultIndex(_ query: String) async throws(LiveError) {
        try await writeIndex("resetting") { db in
            try db.execute(sql: "DELETE FROM resultItem WHERE query = ?", arguments: [query])
            try db.execute(
                sql: "INSERT OR REPLACE INTO resultIndex (query, filled, complete, count) VALUES (?, 0, 0, 0)",
                arguments: [query]
            )
        }
    }

    /// Forgets the index of `query`.
    func dropResultIndex(_ query: String) async throws(LiveError) {
        try await writeIndex("dropping") { db in
            try db.execute(sql: "DELETE FROM resultItem WHERE query = ?", arguments: [query])
            try db.execute(sql: "DELETE FROM resultIndex WHERE query = ?", arguments: [query])
        }
    }

    func resultIndexState(_ query: String) async throws(LiveError) -> ResultIndexState {
        try await readIndex { db in try Self.state(db, query) }
    }

    /// Where the last item the index holds was placed (to fetch the next page after it).
    func lastResultPosition(_ query: String) async throws(LiveError) -> QueryPosition? {
        try await readIndex { db in
            let state = try Self.state(db, query)
            guard state.filled > 0 else { return nil }
            return try Self.placedPosition(db, query, at: state.filled - 1)
        }
    }

    /// Appends a page fetched after the index's last item, and records whether it ends the result. Ids the
    /// index holds already (a change applied while the page was fetched) are not added twice.
    ///
    /// Each item is placed by the page's copy of it (the page is sorted by those): one the cache holds newer is
    /// moved where it belongs by its change, applied again after the page.
    ///
    /// - Parameter last: where the last item the page was fetched after was placed (`nil`: from the first).
    ///   When the index no longer ends there (a reset emptied it while the page was on its way, or that item
    ///   left), the page does not follow what the index holds: it is not stored, and `false` is returned.
    @discardableResult
    package func appendResultPage(
        _ query: String,
        _ collectionQuery: CollectionQuery,
        after last: QueryPosition?,
        _ entities: [Entity],
        complete: Bool,
        count: Int
    ) async throws(LiveError) -> Bool {
        try await writeIndex("filling") { db in
            var state = try Self.state(db, query)
            let currentLast = state.filled > 0 ? try Self.placedPosition(db, query, at: state.filled - 1) : nil
            guard currentLast == last else { return false }
            for entity in entities {
                _ = try self.upsert(entity, in: db)
                guard try Self.position(db, query, of: entity.id) == nil else { continue }
                try Self.insertItem(db, query, collectionQuery.position(of: entity), at: state.filled)
                state.filled += 1
            }
            state.complete = complete
            state.count = complete ? state.filled : max(count, state.filled)
            try Self.save(db, query, state)
            return true
        }
    }

    /// Applies a change of `changed`'s object to the index of `query`, as the cache now holds the object (a
    /// copy older than the cache's, heard late on another topic, places it where the newest copy belongs;
    /// `changed` itself only when the cache no longer holds it): it leaves its place, and when it matches,
    /// takes its sorted place if that is within the items the index holds (or at their end when they are the
    /// whole result). Idempotent: applying it again changes nothing.
    func applyToResultIndex(_ query: String, _ collectionQuery: CollectionQuery, _ changed: Entity) async throws(LiveError)
        -> ResultIndexChange
    {
        try await writeIndex("updating") { db in
            let entity = try Self.entity(db, changed.key) ?? changed
            var state = try Self.state(db, query)
            let wasThere: Bool
            if let old = try Self.position(db, query, of: entity.id) {
                try db.execute(sql: "DELETE FROM resultItem WHERE query = ? AND id = ?", arguments: [query, entity.id])
                try db.execute(
                    sql: "UPDATE resultItem SET position = position - 1 WHERE query = ? AND position > ?",
                    arguments: [query, old]
                )
                state.filled -= 1
                wasThere = true
            } else {
                wasThere = false
            }
            let matches = collectionQuery.matches(entity)
            if matches {
                // Binary search over the positions, by the values the items were placed by.
                let position = collectionQuery.position(of: entity)
                var low = 0
                var high = state.filled
                while low < high {
                    let middle = (low + high) / 2
                    guard let probe = try Self.placedPosition(db, query, at: middle) else { return .entityMissing }
                    if collectionQuery.areInIncreasingOrder(probe, position) {
                        low = middle + 1
                    } else {
                        high = middle
                    }
                }
                if low < state.filled || state.complete {
                    try db.execute(
                        sql: "UPDATE resultItem SET position = position + 1 WHERE query = ? AND position >= ?",
                        arguments: [query, low]
                    )
                    try Self.insertItem(db, query, position, at: low)
                    state.filled += 1
                }
            }
            if state.complete {
                state.count = state.filled
            } else if wasThere && !matches {
                state.count -= 1
            } else if !wasThere && matches && entity.version == 1 {
                state.count += 1
            }
            try Self.save(db, query, state)
            return .applied
        }
    }

    /// What reading a range of a result index found.
    enum ResultItems: Sendable {
        /// The items at the positions asked for, in order (fewer only where the whole result ends), with the
        /// result's count as the same state of the index holds it.
        case items([Entity], count: Int)
        /// The index holds fewer items than asked for and is not the whole result (a change removed some,
        /// or a reset emptied it, since it was filled): fill it again.
        case short
        /// An entity of the range is no longer cached (evicted).
        case entityMissing
    }

    /// The index's items at `positions`, in order, read in one transaction with how far the index reaches and
    /// the result's count, so they are one state of it.
    func resultItems(_ query: String, collection: String, _ positions: Range<Int>) async throws(LiveError) -> ResultItems {
        try await readIndex { db in
            let state = try Self.state(db, query)
            guard state.filled >= positions.upperBound || state.complete else { return .short }
            let ids = try String.fetchAll(
                db,
                sql: "SELECT id FROM resultItem WHERE query = ? AND position >= ? AND position < ? ORDER BY position",
                arguments: [query, positions.lowerBound, positions.upperBound]
            )
            var entities: [Entity] = []
            entities.reserveCapacity(ids.count)
            for id in ids {
                guard let entity = try Self.entity(db, EntityKey(collection: collection, id: id)) else { return .entityMissing }
                entities.append(entity)
            }
            return .items(entities, count: state.count)
        }
    }

    // MARK: Helpers

    private static func state(_ db: Database, _ query: String) throws -> ResultIndexState {
        guard let row = try Row.fetchOne(db, sql: "SELECT filled, complete, count FROM resultIndex WHERE query = ?", arguments: [query])
        else { return ResultIndexState(filled: 0, complete: false, count: 0) }
        return ResultIndexState(filled: row["filled"], complete: row["complete"], count: row["count"])
    }

    private static func save(_ db: Database, _ query: String, _ state: ResultIndexState) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO resultIndex (query, filled, complete, count) VALUES (?, ?, ?, ?)",
            arguments: [query, state.filled, state.complete, state.count]
        )
    }

    private static func position(_ db: Database, _ query: String, of id: String) throws -> Int? {
        try Int.fetchOne(db, sql: "SELECT position FROM resultItem WHERE query = ? AND id = ?", arguments: [query, id])
    }

    /// The id of the item at `position` and the sort value it was placed by (`nil`: no item there, or one
    /// placed by a version that stored none).
    private static func placedPosition(_ db: Database, _ query: String, at position: Int) throws -> QueryPosition? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT id, sortValue FROM resultItem WHERE query = ? AND position = ?"),
                arguments: [query, position]
            ),
            let sortValue = row[1] as String?
        else { return nil }
        return QueryPosition(value: try CloudJSON.value(utf8: sortValue.utf8), id: row[0])
    }

    private static func insertItem(_ db: Database, _ query: String, _ placedBy: QueryPosition, at position: Int) throws {
        var sortValue = JSONWriter()
        try sortValue.write(placedBy.value)
        try db.cachedStatement(sql: "INSERT INTO resultItem (query, position, id, sortValue) VALUES (?, ?, ?, ?)")
            .execute(arguments: [query, position, placedBy.id, String(decoding: sortValue.bytes, as: UTF8.self)])
    }

    private func readIndex<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(LiveError) -> T {
        do {
            return try await pool.read(body)
        } catch {
            throw monitor.failure(error, doing: "reading a result index from the cache", path: path)
        }
    }

    private func writeIndex<T: Sendable>(_ what: String, _ body: @Sendable @escaping (Database) throws -> T) async throws(LiveError) -> T {
        do {
            let result = try await pool.write(body)
            monitor.success(path)
            return result
        } catch {
            throw monitor.failure(error, doing: "\(what) a result index in the cache", path: path)
        }
    }
}
