// Licensed under the Apache License, Version 2.0.

// A dictionary or set keeps the capacity of the most it ever held. The engine's tables of work in flight
// (subscriptions awaiting their answer, fetches, replays) fill with a burst of thousands of new observations
// and are nearly empty after it, holding the burst's storage for as long as the process runs. Removing through these gives the storage back once a table holds under an eighth
// of its capacity, rebuilt at its size (amortized: at least seven eighths of it were removed since it grew).

extension Dictionary {
    /// ``removeValue(forKey:)``, then the storage given back when the dictionary is sparse.
    @inlinable
    @discardableResult
    package mutating func removeValueShrinking(forKey key: Key) -> Value? {
        let value = removeValue(forKey: key)
        // Rebuilt from its members, not from itself (which would take its storage).
        if capacity > 64, count < capacity / 8 { self = isEmpty ? [:] : Dictionary(uniqueKeysWithValues: self.lazy.map { ($0.key, $0.value) }) }
        return value
    }
}

extension Set {
    /// ``remove(_:)``, then the storage given back when the set is sparse.
    @inlinable
    @discardableResult
    package mutating func removeShrinking(_ member: Element) -> Element? {
        let removed = remove(member)
        // Not `Set(self)`: built from a set, a set takes that set's storage.
        if capacity > 64, count < capacity / 8 { self = isEmpty ? [] : Set(self.lazy.map { $0 }) }
        return removed
    }
}
