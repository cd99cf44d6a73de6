// Licensed under the Apache License, Version 2.0.

import GRDB
import LiveCloudAPI
import LiveJSON

/// The SQLite form of a `CollectionQuery`: its filter, its order and its keyset comparisons.
///
/// An item's place in the order is the triple `(hasValue, value, id)`: `hasValue` is 0 for a missing or
/// `null` sort field, so those come first; `value` is the field as `json_extract` gives it (booleans as 0/1,
/// numbers compared numerically, strings and JSON text by bytes), which is the order `QueryPosition`
/// implements in Swift. Field names are validated (`CollectionQuery.isValidField`) before they reach SQL.
struct SQLiteQuerySQL {
    let query: CollectionQuery
    let filter: String
    let filterArguments: StatementArguments

    init(_ query: CollectionQuery) {
        self.query = query
        var clauses = ["collection = ?", "deleted = 0"]
        var arguments: StatementArguments = [query.collection]
        for (field, value) in query.where.sorted(by: { $0.key < $1.key }) {
            let path = "'$.\(field)'"
            switch value {
            case .null:
                clauses.append("json_extract(data, \(path)) IS NULL")
            case .bool(let flag):
                clauses.append("json_type(data, \(path)) = '\(flag ? "true" : "false")'")
            case .number(let number):
                clauses.append("json_type(data, \(path)) IN ('integer', 'real') AND json_extract(data, \(path)) = ?")
                arguments += [number]
            case .string(let string):
                clauses.append("json_type(data, \(path)) = 'text' AND json_extract(data, \(path)) = ?")
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
        guard let sort = query.sort else { return [] }
        let value = "json_extract(data, '$.\(sort.field)')"
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
        case .number(let number): value = number
        case .string(let string): value = string
        case .array, .object: value = position.textForOrdering
        }
        return [1, value, position.id]
    }
}
