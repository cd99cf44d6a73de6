// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import PostgresNIO

/// A statement being built: SQL text with `$n` placeholders, and the values bound to them.
struct PostgresStatement {
    private(set) var sql = ""
    private(set) var bindings = PostgresBindings()

    init(_ sql: String = "") { self.sql = sql }

    /// Binds `value` and returns its placeholder.
    mutating func bind(_ value: some PostgresDynamicTypeEncodable) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    mutating func append(_ text: String) { sql += text }

    var query: PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: bindings) }
}

/// The PostgreSQL form of a `CollectionQuery`: its filter, its order and its keyset comparisons, following
/// the order `CollectionQuery` specifies exactly, as `SQLiteQuerySQL` does for SQLite.
///
/// An item's place is the tuple `(rank, number, text, id)`: `rank` 0 for a missing or `null` sort field, 1
/// for numbers and booleans (compared as `numeric`, exactly, `false` = 0 and `true` = 1), 2 for strings, arrays and
/// objects (compared as `text` by bytes, arrays and objects as compact JSON with sorted keys). Field names
/// are validated (`CollectionQuery.isValidField`: letters, digits, `_`) before they are written into SQL.
struct PostgresQuerySQL {
    let query: CollectionQuery

    /// Appends the filter (`WHERE` condition) to `statement`.
    func filter(_ statement: inout PostgresStatement) {
        statement.append("collection = \(statement.bind(query.collection)) AND NOT deleted")
        for (field, value) in query.where.sorted(by: { $0.key < $1.key }) {
            let path = "data -> '\(field)'"
            switch value {
            case .null:
                statement.append(" AND coalesce(jsonb_typeof(\(path)), 'null') = 'null'")
            case .bool(let flag):
                // As `jsonb_typeof` and `->>` give it, so the field's filter index serves it.
                statement.append(" AND jsonb_typeof(\(path)) = 'boolean' AND data ->> '\(field)' = '\(flag ? "true" : "false")'")
            case .number(let number):
                // `numeric`: exact at any size, as jsonb holds the number.
                statement.append(" AND jsonb_typeof(\(path)) = 'number' AND (data ->> '\(field)')::numeric = \(statement.bind(number.text))::numeric")
            case .string(let string):
                statement.append(" AND jsonb_typeof(\(path)) = 'string' AND data ->> '\(field)' = \(statement.bind(string))")
            case .array, .object:
                statement.append(" AND false")  // refused before it gets here (`CollectionQuery.problem`)
            }
        }
    }

    /// The terms of an item's place in the order, before the id (none without a sort).
    private var terms: [String] { query.sort.map { Self.sortTerms($0.field) } ?? [] }

    /// The index serving `kind` for `field` (``QueryIndexes``). For a sort: the collection, the sort terms
    /// exactly as the query writes them, then the id, over live objects only (the queries' `NOT deleted`):
    /// pages and cursors are read from it, with no sort step. For a filter: the collection, the field's JSON
    /// type and its text, a filter's matches found (and counted) from it; over every row, since the planner
    /// uses a partial index's statistics for nothing, and without them it takes a filter that matches a
    /// third of the collection for one that matches a row, and sorts the third for a page.
    static func index(_ kind: QueryIndexes.Kind, _ field: String) -> String {
        let name = "\"lg_\(kind.rawValue)_\(field)\""
        switch kind {
        case .sort:
            let columns = ["collection"] + sortTerms(field).map { "(\($0))" } + ["id"]
            return "CREATE INDEX IF NOT EXISTS \(name) ON entity (\(columns.joined(separator: ", "))) WHERE NOT deleted"
        case .filter:
            return "CREATE INDEX IF NOT EXISTS \(name) ON entity (collection, jsonb_typeof(data -> '\(field)'), (data ->> '\(field)'))"
        }
    }

    /// The terms of an item's place in an order by `field`, before the id.
    static func sortTerms(_ field: String) -> [String] {
        let value = "data -> '\(field)'"
        let kind = "jsonb_typeof(\(value))"
        return [
            "(CASE \(kind) WHEN 'number' THEN 1 WHEN 'boolean' THEN 1 WHEN 'string' THEN 2 WHEN 'array' THEN 2 WHEN 'object' THEN 2 ELSE 0 END)",
            "(CASE \(kind) WHEN 'number' THEN (data ->> '\(field)')::numeric WHEN 'boolean' THEN (CASE WHEN \(value) = 'true'::jsonb THEN 1 ELSE 0 END) ELSE 0 END)",
            "(CASE \(kind) WHEN 'string' THEN data ->> '\(field)' WHEN 'array' THEN livegate_compact(\(value)) WHEN 'object' THEN livegate_compact(\(value)) ELSE '' END) COLLATE \"C\"",
        ]
    }

    private var descending: Bool { query.sort?.descending ?? false }

    /// `ORDER BY` in the query's order (`forward`) or its reverse.
    func order(forward: Bool) -> String {
        let direction = forward != descending ? "ASC" : "DESC"
        return (terms + ["id"]).map { "\($0) \(direction)" }.joined(separator: ", ")
    }

    /// Appends the condition "after (or before) `position` in the query's order" (`inclusive`: or at it).
    func comparison(after: Bool, _ position: QueryPosition, inclusive: Bool = false, _ statement: inout PostgresStatement) {
        let op = (after != descending ? ">" : "<") + (inclusive ? "=" : "")
        var values: [String] = []
        if query.sort != nil {
            values.append(statement.bind(position.kindRank))
            values.append(statement.bind(position.numeric.text) + "::numeric")
            values.append(statement.bind(position.textForOrdering))
        }
        values.append(statement.bind(position.id))
        statement.append("(\((terms + ["id"]).joined(separator: ", "))) \(op) (\(values.joined(separator: ", ")))")
    }
}
