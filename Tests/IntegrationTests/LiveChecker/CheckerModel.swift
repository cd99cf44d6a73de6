// Licensed under the Apache License, Version 2.0.

import LiveJSON

// The live-semantics checker's model, written from `Protocol/ipc/README.md` and `Protocol/cloud/README.md`
// alone: it shares no code with the engine (no LiveChangeSet, no LiveSDK), so a misreading of the spec in
// the engine cannot hide in the model too.

/// One item as the protocol shows it: `{collection, id, version, data}`.
struct CheckedItem: Equatable, Sendable, CustomStringConvertible {
    var id: String
    var version: Int64
    var data: JSONValue

    init(id: String, version: Int64, data: JSONValue) {
        self.id = id
        self.version = version
        self.data = data
    }

    init?(snapshot: JSONValue) {
        guard let id = snapshot["id"]?.stringValue, let version = snapshot["version"]?.numberValue, let data = snapshot["data"] else {
            return nil
        }
        self.init(id: id, version: Int64(version), data: data)
    }

    var description: String { "\(id)@v\(version)\(rankText)" }
    private var rankText: String {
        guard let rank = data["rank"]?.numberValue else { return "" }
        return "(rank \(Int(rank)))"
    }
}

/// A query the checker observes: an optional equality filter on `group` and a sort on `rank`.
struct CheckedQuery: Equatable, Sendable, CustomStringConvertible {
    var group: String?
    var descending: Bool
    var pageSize: Int

    var json: JSONValue {
        var query: [String: JSONValue] = ["sort": ["field": "rank", "descending": .bool(descending)]]
        if let group { query["where"] = ["group": .string(group)] }
        return .object(JSONObject(query))
    }

    var description: String { "{group: \(group ?? "*"), rank \(descending ? "desc" : "asc"), pageSize \(pageSize)}" }

    func matches(_ data: JSONValue) -> Bool {
        guard let group else { return true }
        return data["group"] == .string(group)
    }

    /// The cloud's order (Protocol/cloud, *Queries*): by the sort field, then by id; `descending` reverses both.
    /// Items without a numeric rank sort first (the checker always writes one).
    func precedes(_ a: CheckedItem, _ b: CheckedItem) -> Bool {
        descending ? Self.ascending(b, a) : Self.ascending(a, b)
    }

    private static func ascending(_ a: CheckedItem, _ b: CheckedItem) -> Bool {
        let ra = a.data["rank"]?.numberValue ?? -.infinity
        let rb = b.data["rank"]?.numberValue ?? -.infinity
        return ra != rb ? ra < rb : a.id < b.id
    }

    /// The whole result over the objects `live` (deleted ones absent).
    func result(_ live: [CheckedItem]) -> [CheckedItem] {
        live.filter { matches($0.data) }.sorted(by: precedes)
    }
}

/// A change set as `collection.changed` carries it, applied by the rules of the spec ("Applying a
/// notification"), with every index checked.
struct CheckedChanges {
    var deletions: [Int]
    var insertions: [Int]
    var modifications: [(Int, Int)]
    var moves: [(Int, Int)]
    var items: [Int: CheckedItem]

    init(params: JSONValue) throws(CheckFailure) {
        guard let changes = params["changes"] else { throw CheckFailure("no `changes` member") }
        func indices(_ key: String) throws(CheckFailure) -> [Int] {
            guard case .array(let values)? = changes[key] else { throw CheckFailure("`changes.\(key)` is not an array") }
            return try values.map { value throws(CheckFailure) in
                guard let n = value.numberValue else { throw CheckFailure("`changes.\(key)` holds a non-number") }
                return Int(n)
            }
        }
        func pairs(_ key: String) throws(CheckFailure) -> [(Int, Int)] {
            guard case .array(let values)? = changes[key] else { throw CheckFailure("`changes.\(key)` is not an array") }
            return try values.map { value throws(CheckFailure) in
                guard case .array(let pair) = value, pair.count == 2, let a = pair[0].numberValue, let b = pair[1].numberValue else {
                    throw CheckFailure("`changes.\(key)` holds something other than a pair")
                }
                return (Int(a), Int(b))
            }
        }
        deletions = try indices("deletions")
        insertions = try indices("insertions")
        modifications = try pairs("modifications")
        moves = try pairs("moves")
        items = [:]
        if case .object(let members)? = params["items"] {
            for (key, value) in members {
                guard let index = Int(key), let item = CheckedItem(snapshot: value) else { throw CheckFailure("bad `items` member \(key)") }
                items[index] = item
            }
        }
    }

    /// The window after these changes, from `old`.
    func apply(to old: [CheckedItem]) throws(CheckFailure) -> [CheckedItem] {
        let removed = Set(deletions).union(moves.map(\.0))
        guard removed.allSatisfy({ old.indices.contains($0) }) else {
            throw CheckFailure("a deletion or move source is outside the old window of \(old.count)")
        }
        guard Set(deletions).count == deletions.count, deletions == deletions.sorted() else {
            throw CheckFailure("deletions not ascending and distinct")
        }
        guard insertions == insertions.sorted(), Set(insertions).count == insertions.count else {
            throw CheckFailure("insertions not ascending and distinct")
        }
        let size = old.count - removed.count + insertions.count + moves.count
        var placed = [CheckedItem?](repeating: nil, count: size)
        for index in insertions {
            guard placed.indices.contains(index), placed[index] == nil else {
                throw CheckFailure("insertion index \(index) outside the new window or taken")
            }
            guard let item = items[index] else { throw CheckFailure("no item for insertion \(index)") }
            placed[index] = item
        }
        for (from, to) in moves {
            guard placed.indices.contains(to), placed[to] == nil else { throw CheckFailure("move destination \(to) outside the new window or taken") }
            placed[to] = old[from]
        }
        var kept = old.indices.filter { !removed.contains($0) }.map { old[$0] }.makeIterator()
        for index in placed.indices where placed[index] == nil {
            guard let next = kept.next() else { throw CheckFailure("fewer kept items than places") }
            placed[index] = next
        }
        guard kept.next() == nil else { throw CheckFailure("more kept items than places") }
        var window = placed.map { $0! }
        for (from, to) in modifications {
            guard old.indices.contains(from), window.indices.contains(to) else {
                throw CheckFailure("modification [\(from),\(to)] outside the windows")
            }
            guard let item = items[to] else { throw CheckFailure("no item for modification [\(from),\(to)]") }
            guard old[from].id == item.id, window[to].id == item.id else {
                throw CheckFailure("modification [\(from),\(to)] pairs \(old[from].id) with \(window[to].id), item \(item.id)")
            }
            window[to] = item
        }
        return window
    }
}

/// A broken promise, with what shows it.
struct CheckFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
