// Licensed under the Apache License, Version 2.0.

/// Values by an integer id, for the observers of one observed object (the engine's observers, the daemon's
/// tokens on one event loop). Most observed objects have one: that one is held inline, a dictionary only from
/// the second on (a dictionary of one costs 150-340 bytes an object, for each of the two tables).
@usableFromInline
package struct IDTable<Value> {
    @usableFromInline
    enum Storage {
        case empty
        case one(id: Int, Value)
        case many([Int: Value])
    }

    @usableFromInline
    var storage = Storage.empty

    @inlinable
    package init() {}

    @inlinable
    package var isEmpty: Bool {
        switch storage {
        case .empty: true
        case .one: false
        case .many(let table): table.isEmpty
        }
    }

    @inlinable
    package var count: Int {
        switch storage {
        case .empty: 0
        case .one: 1
        case .many(let table): table.count
        }
    }

    /// Adds `value` under `id`, replacing what was there.
    @inlinable
    package mutating func insert(_ value: Value, id: Int) {
        switch storage {
        case .empty:
            storage = .one(id: id, value)
        case .one(let existing, _) where existing == id:
            storage = .one(id: id, value)
        case .one(let existing, let other):
            storage = .many([existing: other, id: value])
        case .many(var table):
            storage = .empty  // the dictionary uniquely referenced while it changes
            table[id] = value
            storage = .many(table)
        }
    }

    @inlinable
    @discardableResult
    package mutating func remove(_ id: Int) -> Value? {
        switch storage {
        case .empty:
            return nil
        case .one(let existing, let value):
            guard existing == id else { return nil }
            storage = .empty
            return value
        case .many(var table):
            storage = .empty
            let removed = table.removeValue(forKey: id)
            if !table.isEmpty { storage = .many(table) }
            return removed
        }
    }

    /// Calls `body` with the value under `id` in place; `nil` when there is none.
    @inlinable
    @discardableResult
    package mutating func update<Result>(_ id: Int, _ body: (inout Value) throws -> Result) rethrows -> Result? {
        switch storage {
        case .empty:
            return nil
        case .one(let existing, var value):
            guard existing == id else { return nil }
            storage = .empty
            defer { storage = .one(id: id, value) }
            return try body(&value)
        case .many(var table):
            guard let index = table.index(forKey: id) else { return nil }
            storage = .empty
            defer { storage = .many(table) }
            return try body(&table.values[index])
        }
    }

    /// Calls `body` with each value in place (nothing copied: a copy counts its references again), in no
    /// particular order.
    @inlinable
    package mutating func updateEach(_ body: (Int, inout Value) throws -> Void) rethrows {
        switch storage {
        case .empty:
            return
        case .one(let id, var value):
            storage = .empty
            defer { storage = .one(id: id, value) }
            try body(id, &value)
        case .many(var table):
            storage = .empty
            defer { storage = .many(table) }
            // By index, in place: iterating `(id, var value)` and writing each back copied every value and,
            // mutating the table it iterated, the whole table.
            var index = table.values.startIndex
            while index != table.values.endIndex {
                try body(table.keys[index], &table.values[index])
                index = table.values.index(after: index)
            }
        }
    }
}
