// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import GRDBSQLite
import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// A query window's result as last fetched, kept in the cache with its entities.
extension CacheStore {
    /// A query window's result as last fetched: the ordered ids (entities are in the entity table).
    package struct QueryResult: Sendable, Codable {
        var ids: [String]
        var hasNext: Bool
        var hasPrevious: Bool
        var count: Int
        /// The collection topic's sequence number the result is as of (every event up to it is in it), when
        /// known: a later run resumes the topic from there and replays the rest instead of fetching.
        var seq: Int64? = nil

        package init(ids: [String], hasNext: Bool, hasPrevious: Bool, count: Int, seq: Int64? = nil) {
            self.ids = ids
            self.hasNext = hasNext
            self.hasPrevious = hasPrevious
            self.count = count
            self.seq = seq
        }
    }

    /// The cached result of a window, with its entities in order (ids whose entity is no longer cached, or is
    /// deleted, are left out).
    func queryResult(_ window: String, collection: String) async throws(LiveError) -> (QueryResult, [Entity])? {
        do {
            return try await pool.read { db -> (QueryResult, [Entity])? in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM queryResult WHERE window = ?", arguments: [window]) else {
                    return nil
                }
                let idsText: String = row["ids"]
                let ids = try JSONDecoder().decode([String].self, from: Data(idsText.utf8))
                var entities: [Entity] = []
                for id in ids {
                    if let entity = try Self.entity(db, EntityKey(collection: collection, id: id)), !entity.deleted {
                        entities.append(entity)
                    }
                }
                let result = QueryResult(ids: ids, hasNext: row["hasNext"], hasPrevious: row["hasPrevious"], count: row["count"], seq: row["seq"])
                return (result, entities)
            }
        } catch {
            throw monitor.failure(error, doing: "reading a query result from the cache", path: path)
        }
    }

    /// Stores a window's result and its entities (each only if newer than what the cache holds), in one
    /// transaction.
    package func storeQueryResult(_ window: String, _ result: QueryResult, entities: [Entity]) async throws(LiveError) {
        do {
            let ids = String(decoding: try JSONEncoder().encode(result.ids), as: UTF8.self)
            try await pool.write { db in
                for entity in entities { _ = try self.upsert(entity, in: db) }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO queryResult (window, ids, hasNext, hasPrevious, count, seq) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [window, ids, result.hasNext, result.hasPrevious, result.count, result.seq]
                )
            }
            monitor.success(path)
        } catch {
            throw monitor.failure(error, doing: "writing a query result to the cache", path: path)
        }
    }
}
