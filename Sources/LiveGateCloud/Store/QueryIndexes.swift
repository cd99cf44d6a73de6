// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import Synchronization

/// The indexes a store made for queries, on demand: the first query sorted by a field makes the index that
/// serves that order (its pages and cursors read from it, no sort step), and the first filtered by a field
/// makes the one that finds and counts its matches (see Protocol/cloud, Queries). At most ``limit`` are
/// made: each costs every write of an object, and the fields are the clients' choice; beyond it, queries
/// still work, reading more.
final class QueryIndexes: Sendable {
    static let limit = 32

    /// What an index serves: the order by a field, or a filter on it.
    enum Kind: String, Sendable {
        case sort
        case filter
    }

    struct Index: Hashable, Sendable {
        let kind: Kind
        let field: String

        init(kind: Kind, field: String) {
            self.kind = kind
            self.field = field
        }

        /// The index a store's index of this name is (`lg_<kind>_<field>`), if it is one of these.
        init?(name: String) {
            let parts = name.split(separator: "_", maxSplits: 2)
            guard parts.count == 3, parts[0] == "lg", let kind = Kind(rawValue: String(parts[1])) else { return nil }
            self.init(kind: kind, field: String(parts[2]))
        }
    }

    private let made = Mutex<Set<Index>>([])

    init(made: Set<Index> = []) {
        self.made.withLock { $0 = made }
    }

    /// The indexes `query` would use that are not made yet and fit within the limit. The caller makes them,
    /// then calls ``made(_:)``; one that failed is tried again by the next query that needs it.
    func missing(for query: CollectionQuery) -> [Index] {
        var wanted = query.where.keys.sorted().map { Index(kind: .filter, field: $0) }
        if let sort = query.sort { wanted.append(Index(kind: .sort, field: sort.field)) }
        return made.withLock { made in
            var room = Self.limit - made.count
            return wanted.filter { index in
                guard !made.contains(index), room > 0 else { return false }
                room -= 1
                return true
            }
        }
    }

    func made(_ index: Index) {
        made.withLock { _ = $0.insert(index) }
    }

    /// The fields of `query` that have an index made (sort or filter): a store reads them through what the
    /// index is over.
    func indexedFields(of query: CollectionQuery) -> Set<String> {
        let fields = Set(query.where.keys).union(query.sort.map { [$0.field] } ?? [])
        return made.withLock { made in
            fields.filter { made.contains(Index(kind: .sort, field: $0)) || made.contains(Index(kind: .filter, field: $0)) }
        }
    }
}
