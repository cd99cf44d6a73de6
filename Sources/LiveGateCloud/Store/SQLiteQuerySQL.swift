// Licensed under the Apache License, Version 2.0.

import GRDB
import LiveCloudAPI
import LiveJSON

/// The SQLite form of a `CollectionQuery`: its filter, its order and its keyset comparisons.
///
/// An item's place in the order is the triple `(hasValue, value, id)`: `hasValue` is 0 for a missing or
/// `null` sort field, so those come first; `value` is the field as `json_extract` gives it (booleans as 0/1,
/// numbers compared numerically: integers within `Int64` exactly, others as `REAL`; strings and JSON text by
/// bytes), which is the order `QueryPosition`
/// implements in Swift. Field names are validated (`CollectionQuery.isValidField`) before they reach SQL.
///
/// A field with an index (``QueryIndexes``) is read through generated columns of its own (``FieldColumns``):
/// SQLite seeks a row value such as a cursor's `(hasValue, value, id)` in an index of plain columns, not of
/// expressions.
struct SQLiteQuerySQL {
    let query: CollectionQuery
    let filter: String
    let filterArguments: StatementArguments
    /// The fields read through their generated columns.
    let columned: Set<String>

    init(_ query: CollectionQuery, columned: Set<String> = []) {
        self.query = query
        self.columned = columned
        var clauses = ["collection = ?", "deleted = 0"]
        var arguments: StatementArguments = [query.collection]
        for (field, value) in query.where.sorted(by: { $0.key < $1.key }) {
            let columns = FieldColumns(field)
            let type = columned.contains(field) ? columns.type : "json_type(data, '$.\(field)')"
            let extracted = columned.contains(field) ? columns.value : "json_extract(data, '$.\(field)')"
            switch value {
            case .null:
                clauses.append("\(extracted) IS NULL")
            case .bool(let flag):
                clauses.append("\(type) = '\(flag ? "true" : "false")'")
            case .number(let number):
                clauses.append("\(type) IN ('integer', 'real') AND \(extracted) = ?")
                arguments += [Self.sqliteNumber(number)]
            case .string(let string):
                clauses.append("\(type) = 'text' AND \(extracted) = ?")
                arguments += [string]
            case .array, .object:
                clauses.append("0")  // refused before it gets here (`CollectionQuery.problem`)
            }
        }
        filter = clauses.joined(separator: " AND ")
        filterArguments = arguments
    }

    /// The terms of an item's place in the order, before the id (none without a sort).
    private var terms: [String] {
        guard let field = query.sort?.field else { return [] }
        if columned.contains(field) {
            let columns = FieldColumns(field)
            return [columns.hasValue, columns.orderValue]
        }
        let value = "json_extract(data, '$.\(field)')"
        return ["(\(value) IS NOT NULL)", "ifnull(\(value), 0)"]
    }

    private var descending: Bool { query.sort?.descending ?? false }

    /// `ORDER BY` in the query's order (`forward`) or its reverse.
    func order(forward: Bool) -> String {
        let direction = forward != descending ? "ASC" : "DESC"
        return (terms + ["id"]).map { "\($0) \(direction)" }.joined(separator: ", ")
    }

    /// Items after (or before) a position given by ``arguments(for:)``, in the query's order.
    func comparison(after: Bool) -> String {
        let op = after != descending ? ">" : "<"
        let columns = terms + ["id"]
        let placeholders = Array(repeating: "?", count: columns.count)
        return "(\(columns.joined(separator: ", "))) \(op) (\(placeholders.joined(separator: ", ")))"
    }

    func arguments(for position: QueryPosition) -> StatementArguments {
        guard query.sort != nil else { return [position.id] }
        let value: (any DatabaseValueConvertible)?
        switch position.value {
        case .null: return [0, 0, position.id]
        case .bool(let flag): value = flag ? 1 : 0
        case .number(let number): value = Self.sqliteNumber(number)
        case .string(let string): value = string
        case .array, .object: value = position.textForOrdering
        }
        return [1, value, position.id]
    }

    /// A number as SQLite's `json_extract` reads it from the stored text: an integer within `Int64` as one
    /// (compared exactly, with integers and reals alike), any other as its nearest `REAL`. Beyond `Int64` and
    /// past 2^53 in a fraction, SQLite compares numbers by their nearest `REAL` (Protocol/cloud says so).
    static func sqliteNumber(_ number: JSONNumber) -> any DatabaseValueConvertible {
        if let integer = number.int64Value { return integer }
        return number.doubleValue
    }
}

/// A field's generated columns (virtual: computed when read, stored only in the indexes over them) and the
/// statements that make them and its indexes.
struct FieldColumns {
    let field: String

    init(_ field: String) { self.field = field }

    var type: String { "\"lg_\(field)_type\"" }
    var value: String { "\"lg_\(field)_value\"" }
    var hasValue: String { "\"lg_\(field)_has\"" }
    var orderValue: String { "\"lg_\(field)_order\"" }

    /// The column whose presence says the field has its columns.
    var marker: String { "lg_\(field)_order" }

    /// Adds the columns (`ALTER TABLE … ADD COLUMN … VIRTUAL` rewrites nothing).
    var adding: [String] {
        let path = "'$.\(field)'"
        return [
            "ALTER TABLE entity ADD COLUMN \(type) AS (json_type(data, \(path))) VIRTUAL",
            "ALTER TABLE entity ADD COLUMN \(value) AS (json_extract(data, \(path))) VIRTUAL",
            "ALTER TABLE entity ADD COLUMN \(hasValue) AS (json_extract(data, \(path)) IS NOT NULL) VIRTUAL",
            "ALTER TABLE entity ADD COLUMN \(orderValue) AS (ifnull(json_extract(data, \(path)), 0)) VIRTUAL",
        ]
    }

    /// The index serving `kind`: a sort's order and cursors, or a filter's matches and their count (the
    /// type is in it, so counting reads the index alone). Over live objects only (the queries' `deleted = 0`).
    func index(_ kind: QueryIndexes.Kind) -> String {
        let columns = kind == .sort ? ["collection", hasValue, orderValue, "id"] : ["collection", type, value]
        return "CREATE INDEX IF NOT EXISTS \"lg_\(kind.rawValue)_\(field)\" ON entity (\(columns.joined(separator: ", "))) WHERE deleted = 0"
    }
}
