// Licensed under the Apache License, Version 2.0.

/// How an ordered result changed from one emission to the next, in both coordinates.
///
/// - `deletions`: indices in the **old** result of items that left, ascending.
/// - `insertions`: indices in the **new** result of items that arrived, ascending.
/// - `modifications`: `(old, new)` index pairs of items present in both whose content changed.
/// - `moves`: `(from, to)` pairs — `from` in the old result, `to` in the new — of items present in both whose
///   place relative to the other kept items changed. The kept items that do not move keep their relative
///   order, and as few items move as possible.
///
/// This is exactly what a batch update of a UI list takes (UIKit's `performBatchUpdates`: deletions and
/// reload sources in old indices, insertions and move destinations in new ones). For a list that applies
/// changes one at a time (Android's `RecyclerView`, a plain array), ``steps`` gives the equivalent sequence
/// whose every index is valid at the moment it is applied. ``apply(to:newItem:)`` is the normative meaning;
/// a property test checks, for thousands of random pairs of results, that applying the change set to the old
/// result gives the new one, both ways.
public struct ChangeSet: Hashable, Sendable, Codable {
    public var deletions: [Int]
    public var insertions: [Int]
    public var modifications: [IndexPair]
    public var moves: [IndexPair]

    public init(deletions: [Int] = [], insertions: [Int] = [], modifications: [IndexPair] = [], moves: [IndexPair] = []) {
        self.deletions = deletions
        self.insertions = insertions
        self.modifications = modifications
        self.moves = moves
    }

    public var isEmpty: Bool { deletions.isEmpty && insertions.isEmpty && modifications.isEmpty && moves.isEmpty }

    /// The change set from `old` to `new` (each a list of distinct ids). `isModified(oldIndex, newIndex)` says
    /// whether an item present in both changed its content. O(n log n).
    public static func between<ID: Hashable>(
        old: [ID],
        new: [ID],
        isModified: (_ oldIndex: Int, _ newIndex: Int) -> Bool = { _, _ in false }
    ) -> ChangeSet {
        var newIndex: [ID: Int] = [:]
        newIndex.reserveCapacity(new.count)
        for (index, id) in new.enumerated() { newIndex[id] = index }
        var changes = ChangeSet()
        // Items kept, in old order, with where they are now.
        var kept: [(old: Int, new: Int)] = []
        kept.reserveCapacity(min(old.count, new.count))
        var oldIDs = Set<ID>()
        oldIDs.reserveCapacity(old.count)
        for (index, id) in old.enumerated() {
            oldIDs.insert(id)
            if let now = newIndex[id] {
                kept.append((index, now))
            } else {
                changes.deletions.append(index)
            }
        }
        for (index, id) in new.enumerated() where !oldIDs.contains(id) { changes.insertions.append(index) }
        // The longest run of kept items already in increasing new order stays; every other kept item moves.
        let staying = longestIncreasingSubsequence(kept.map(\.new))
        for (position, pair) in kept.enumerated() {
            if !staying.contains(position) { changes.moves.append(IndexPair(pair.old, pair.new)) }
            if isModified(pair.old, pair.new) { changes.modifications.append(IndexPair(pair.old, pair.new)) }
        }
        return changes
    }

    /// Applies the change set to `old`, taking inserted and modified items from `newItem(newIndex)`. This is
    /// the normative meaning of a change set: kept items that do not move fill the remaining places in their
    /// old relative order.
    public func apply<Item>(to old: [Item], newItem: (Int) -> Item) -> [Item] {
        let count = old.count - deletions.count + insertions.count
        var result = [Item?](repeating: nil, count: count)
        var leaving = Set(deletions)
        for index in insertions { result[index] = newItem(index) }
        for move in moves {
            result[move.new] = old[move.old]
            leaving.insert(move.old)
        }
        var free = 0
        for (index, item) in old.enumerated() where !leaving.contains(index) {
            while result[free] != nil { free += 1 }
            result[free] = item
        }
        for modification in modifications { result[modification.new] = newItem(modification.new) }
        return result.map { $0! }
    }

    /// One change of a list applied one at a time.
    public enum Step: Hashable, Sendable {
        case remove(at: Int)
        case insert(at: Int)
        /// The item now at `at` changed its content.
        case reload(at: Int)
    }

    /// The change set as single steps, each index valid when its step is applied: removals (deletions and move
    /// sources) in descending order, then insertions (insertions and move destinations) in ascending order,
    /// then reloads at new indices.
    public var steps: [Step] {
        let removals = (deletions + moves.map(\.old)).sorted(by: >)
        let additions = (insertions + moves.map(\.new)).sorted()
        return removals.map { .remove(at: $0) } + additions.map { .insert(at: $0) } + modifications.map { .reload(at: $0.new) }
    }

    /// Positions (in `values`) of one longest strictly increasing subsequence.
    static func longestIncreasingSubsequence(_ values: [Int]) -> Set<Int> {
        var tails: [Int] = []  // tails[k]: position of the smallest tail of an increasing run of length k+1
        var previous = [Int](repeating: -1, count: values.count)
        for (position, value) in values.enumerated() {
            var low = 0
            var high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[position] = tails[low - 1] }
            if low == tails.count { tails.append(position) } else { tails[low] = position }
        }
        var result = Set<Int>()
        var position = tails.last ?? -1
        while position >= 0 {
            result.insert(position)
            position = previous[position]
        }
        return result
    }
}

/// An `(old, new)` or `(from, to)` pair of indices; on the wire, a two-element array.
public struct IndexPair: Hashable, Sendable, Codable, CustomStringConvertible {
    public var old: Int
    public var new: Int

    public init(_ old: Int, _ new: Int) {
        self.old = old
        self.new = new
    }

    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        old = try container.decode(Int.self)
        new = try container.decode(Int.self)
        guard container.isAtEnd else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "an index pair has two elements")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(old)
        try container.encode(new)
    }

    public var description: String { "(\(old), \(new))" }
}
