// Licensed under the Apache License, Version 2.0.

import GRDB
import LiveCloudAPI

/// A query's result by position, in the cache: `resultItem` holds the ids of its first `filled` items in
/// order (the entities are in the entity table), `resultIndex` how far that reaches, whether it is the whole
/// result, and the result's count. Read by position with SQL, so the result is never held in memory.
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

    /// The last item the index holds (to fetch the next page after it).
    func lastResultItem(_ query: String, collection: String) async throws(LiveError) -> Entity? {
        try await readIndex { db in
            let state = try Self.state(db, query)
            guard state.filled > 0 else { return nil }
            return try Self.item(db, query, collection: collection, at: state.filled - 1)
        }
    }

    /// Appends a page fetched after the index's last item, and records whether it ends the result. Ids the
    /// index holds already (a change applied while the page was fetched) are not added twice.
    package func appendResultPage(_ query: String, _ entities: [Entity], complete: Bool, count: Int) async throws(LiveError) {
        try await writeIndex("filling") { db in
            var state = try Self.state(db, query)
            for entity in entities {
                _ = try self.upsert(entity, in: db)
                guard try Self.position(db, query, of: entity.id) == nil else { continue }
                try db.execute(
                    sql: "INSERT INTO resultItem (query, position, id) VALUES (?, ?, ?)",
                    arguments: [query, state.filled, entity.id]
                )
                state.filled += 1
            }
            state.complete = complete
            state.count = complete ? state.filled : max(count, state.filled)
            try Self.save(db, query, state)
        }
    }

    /// Applies a change of `entity` (as the cache now holds it) to the index of `query`: it leaves its place,
    /// and when it matches, takes its sorted place if that is within the items the index holds (or at
    /// their end when they are the whole result). Idempotent: applying it again changes nothing.
    func applyToResultIndex(_ query: String, _ collectionQuery: CollectionQuery, _ entity: Entity) async throws(LiveError)
        -> ResultIndexChange
    {
        try await writeIndex("updating") { db in
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
                // Binary search over the positions, reading each probe from the cache.
                let position = collectionQuery.position(of: entity)
                var low = 0
                var high = state.filled
                while low < high {
                    let middle = (low + high) / 2
                    guard let probe = try Self.item(db, query, collection: collectionQuery.collection, at: middle) else {
                        return .entityMissing
                    }
                    if collectionQuery.areInIncreasingOrder(collectionQuery.position(of: probe), position) {
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
                    try db.execute(
                        sql: "INSERT INTO resultItem (query, position, id) VALUES (?, ?, ?)",
                        arguments: [query, low, entity.id]
                    )
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

    /// The index's items at `positions` (clamped to what it holds), in order; `nil` when one of their
    /// entities is no longer cached.
    func resultItems(_ query: String, collection: String, _ positions: Range<Int>) async throws(LiveError) -> [Entity]? {
        try await readIndex { db in
            let ids = try String.fetchAll(
                db,
                sql: "SELECT id FROM resultItem WHERE query = ? AND position >= ? AND position < ? ORDER BY position",
                arguments: [query, positions.lowerBound, positions.upperBound]
            )
            var entities: [Entity] = []
            entities.reserveCapacity(ids.count)
            for id in ids {
                guard let entity = try Self.entity(db, EntityKey(collection: collection, id: id)) else { return nil }
                entities.append(entity)
            }
            return entities
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

    private static func item(_ db: Database, _ query: String, collection: String, at position: Int) throws -> Entity? {
        guard
            let id = try String.fetchOne(
                db,
                sql: "SELECT id FROM resultItem WHERE query = ? AND position = ?",
                arguments: [query, position]
            )
        else { return nil }
        return try entity(db, EntityKey(collection: collection, id: id))
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
