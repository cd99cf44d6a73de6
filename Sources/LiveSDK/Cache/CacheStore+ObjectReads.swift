// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// Reading cached objects: one, a batch of observations' starts, and recording their use.
extension CacheStore {
    static func entity(_ db: Database, _ key: EntityKey) throws -> Entity? {
        let statement = try db.cachedStatement(sql: "SELECT \(entityColumns) FROM entity WHERE collection = ? AND id = ?")
        // The cursor kept until the row is read: once gone, it resets the statement, whose columns are then empty.
        let cursor = try Row.fetchCursor(statement, arguments: [key.collection, key.id])
        return try withExtendedLifetime(cursor) {
            guard let row = try cursor.next() else { return nil }
            return try entity(from: row, of: statement)
        }
    }

    /// The entity table's columns, in the order ``entity(from:of:)`` reads them.
    static let entityColumns = "collection, id, version, data, createdAt, updatedAt, deleted"
    static let entityColumnCount = entityColumns.split(separator: ",").count

    /// An entity from the row of ``entityColumns`` that `statement` stands on (its cursor still open): the columns
    /// by position (by name, each is a case-insensitive lookup) and the data's JSON parsed from SQLite's bytes in
    /// place (no `Data` a row, nor a generic parse through it).
    static func entity(from row: Row, of statement: Statement) throws -> Entity {
        let sqlite = statement.sqliteStatement
        guard sqlite3_column_type(sqlite, 3) != SQLITE_NULL else {
            throw DatabaseError(resultCode: .SQLITE_MISMATCH, message: "an entity's data is NULL")
        }
        // The pointer first, then the length (SQLite's order: the length of the form the pointer was taken in).
        let pointer = sqlite3_column_blob(sqlite, 3)
        let data = try CloudJSON.value(utf8: UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(sqlite, 3))))
        return Entity(
            collection: row[0],
            id: row[1],
            version: row[2],
            data: data,
            createdAt: row[4],
            updatedAt: row[5],
            deleted: row[6]
        )
    }

    /// The cached entity, if any; records the access for eviction.
    package func entity(_ key: EntityKey) async throws(LiveError) -> Entity? {
        do {
            return try await pool.write { db -> Entity? in
                guard let entity = try Self.entity(db, key) else { return nil }
                try db.execute(
                    sql: "UPDATE entity SET lastAccess = ? WHERE collection = ? AND id = ?",
                    arguments: [Date().timeIntervalSince1970, key.collection, key.id]
                )
                return entity
            }
        } catch {
            throw monitor.failure(error, doing: "reading \(key) from the cache", path: path)
        }
    }

    /// The cached copies of `keys` and the checkpoints of their object topics (both in their order), in one read
    /// transaction (a reader's, not the writer's: it waits for no write, and one snapshot holds the copies and
    /// the checkpoints): what a burst of new observations starts from. Their access time is recorded when the
    /// engine activates them (``touch(_:)``), after the burst's cached answers.
    ///
    /// A cached object's checkpoints come with its row: the one kept in the row and, by a subquery on the
    /// `checkpoint` table's key, one kept apart (of a fetch that found the object older than the copy held, or
    /// written by a version before `v9-entity-topic-seq`), while the table may hold any
    /// (``objectCheckpointsApart``). Only the keys with no row are looked up in the table apart. Each row finds its
    /// place by its id, within its collection's keys (a burst of 10,000 built a topic's name for each key, and
    /// looked each up in the table apart: a quarter of this read).
    package func starts(of keys: [EntityKey]) async throws(LiveError) -> (entities: [Entity?], checkpoints: [Int64?]) {
        do {
            return try await pool.read { db in
                let layout = StartLayout(keys)
                var entities = [Entity?](repeating: nil, count: keys.count)
                var checkpoints = [Int64?](repeating: nil, count: keys.count)
                var apart = self.objectCheckpointsApart.load(ordering: .sequentiallyConsistent)
                while true {
                    try self.readRows(layout, apart: apart, into: &entities, &checkpoints, in: db)
                    // Read after the rows, so after this read's snapshot was taken: unset still, no such row was
                    // committed before it (it is set before one is written). Set meanwhile: read again with them.
                    if apart || !self.objectCheckpointsApart.load(ordering: .sequentiallyConsistent) { break }
                    apart = true
                }
                // Checkpoints of objects not cached: of an object the cloud did not have when fetched.
                var missing: [String: Int] = [:]
                for group in layout.groups {
                    for position in group.positions.values where entities[position] == nil {
                        missing[Topic.object(keys[position]).description] = position
                    }
                }
                let topics = Array(missing.keys)
                for start in stride(from: 0, to: topics.count, by: Self.idListLimit) {
                    let list = Self.paddedIDList(Array(topics[start..<min(start + Self.idListLimit, topics.count)]))
                    let rows = try Row.fetchCursor(
                        db.cachedStatement(sql: "SELECT topic, seq FROM checkpoint WHERE topic IN (\(Self.placeholders(list.count)))"),
                        arguments: StatementArguments(list)
                    )
                    while let row = try rows.next() {
                        if let position = missing[row[0] as String] { checkpoints[position] = row[1] }
                    }
                }
                for (position, first) in layout.repeats {
                    entities[position] = entities[first]
                    checkpoints[position] = checkpoints[first]
                }
                return (entities, checkpoints)
            }
        } catch {
            throw monitor.failure(error, doing: "reading \(keys.count) objects from the cache", path: path)
        }
    }

    /// The cached rows of `layout`'s keys, and the checkpoints they come with, each at its key's position: the one
    /// kept in the row and, when `apart`, the one kept in the `checkpoint` table.
    private func readRows(
        _ layout: StartLayout,
        apart: Bool,
        into entities: inout [Entity?],
        _ checkpoints: inout [Int64?],
        in db: Database
    ) throws {
        for group in layout.groups {
            for start in stride(from: 0, to: group.ids.count, by: Self.idListLimit) {
                let ids = Self.paddedIDList(Array(group.ids[start..<min(start + Self.idListLimit, group.ids.count)]))
                // The rows read in place, not copied; the checkpoints after the entity's columns, the table's by the
                // topic's name (``Topic/description`` of `.object`) built in SQL.
                let checkpointApart = apart ? ", (SELECT seq FROM checkpoint WHERE topic = 'object:' || entity.collection || '/' || entity.id)" : ""
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT \(Self.entityColumns), topicSeq\(checkpointApart) \
                        FROM entity WHERE collection = ? AND id IN (\(Self.placeholders(ids.count)))
                        """
                )
                let rows = try Row.fetchCursor(statement, arguments: StatementArguments([group.collection] + ids))
                while let row = try rows.next() {
                    guard let position = group.positions[row[1] as String] else { continue }
                    entities[position] = try Self.entity(from: row, of: statement)
                    checkpoints[position] = Self.later(row[Self.entityColumnCount], apart ? row[Self.entityColumnCount + 1] : nil)
                }
            }
        }
    }

    /// Where each of the keys ``starts(of:)`` reads goes in its answer: their ids by collection, each with its
    /// position (the first, for a key asked for more than once). Consecutive keys of one collection (a burst's, as
    /// a rule) compare its name rather than hash it.
    struct StartLayout {
        var groups: [(collection: String, ids: [String], positions: [String: Int])] = []
        /// Keys asked for again: the position, and that of the first time.
        var repeats: [(position: Int, first: Int)] = []

        init(_ keys: [EntityKey]) {
            var groupOf: [String: Int] = [:]
            var current = -1
            for (position, key) in keys.enumerated() {
                if current < 0 || groups[current].collection != key.collection {
                    if let existing = groupOf[key.collection] {
                        current = existing
                    } else {
                        current = groups.count
                        groupOf[key.collection] = current
                        groups.append((key.collection, [], [:]))
                    }
                }
                if let first = groups[current].positions.updateValue(position, forKey: key.id) {
                    groups[current].positions[key.id] = first
                    repeats.append((position, first))
                } else {
                    groups[current].ids.append(key.id)
                }
            }
        }
    }

    /// `count` SQL parameters, comma-separated.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ",")
    }

    /// Records that `keys` were used now (those the cache holds), as ``entity(_:)`` does for one: eviction takes
    /// the least recently used first.
    package func touch(_ keys: [EntityKey]) async throws(LiveError) {
        guard !keys.isEmpty else { return }
        do {
            try await pool.write { db in
                let now = Date().timeIntervalSince1970
                for list in Self.idLists(keys) {
                    try db.cachedStatement(sql: "UPDATE entity SET lastAccess = ? WHERE collection = ? AND id IN (\(list.marks))")
                        .execute(arguments: [now, list.collection] + StatementArguments(list.ids))
                }
            }
        } catch {
            throw monitor.failure(error, doing: "recording the use of \(keys.count) objects in the cache", path: path)
        }
    }

    /// The most ids (or topics) an `IN` list of ``starts(of:)`` and ``touch(_:)`` holds.
    package static let idListLimit = 512

    /// `keys` as the `IN` lists of ``touch(_:)``: by collection, at most ``idListLimit`` ids
    /// each (SQLite takes at most 32,766 parameters a statement), padded (``paddedIDList(_:)``), with their
    /// placeholders.
    static func idLists(_ keys: [EntityKey]) -> [(collection: String, ids: [String], marks: String)] {
        var lists: [(collection: String, ids: [String], marks: String)] = []
        for (collection, keys) in Dictionary(grouping: keys, by: \.collection) {
            for start in stride(from: 0, to: keys.count, by: idListLimit) {
                let ids = paddedIDList(keys[start..<min(start + idListLimit, keys.count)].map(\.id))
                lists.append((collection, ids, placeholders(ids.count)))
            }
        }
        return lists
    }

    /// `ids` (at most ``idListLimit``) with the last repeated up to the next power of two from 8: the statements
    /// of ``starts(of:)`` and ``touch(_:)`` are cached by their text, and one per length of list would keep up to
    /// 1,000 prepared statements of up to 500 parameters on a connection (13 MB after a burst of 100,000
    /// observations, which made lists of every length). Seven lengths; a repeated id matches its row once.
    package static func paddedIDList(_ ids: [String]) -> [String] {
        guard let last = ids.last else { return ids }
        var length = 8
        while length < ids.count { length *= 2 }
        return ids + Array(repeating: last, count: length - ids.count)
    }

    /// The later of two checkpoints of one topic (either may be missing).
    static func later(_ a: Int64?, _ b: Int64?) -> Int64? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }
}
