// Licensed under the Apache License, Version 2.0.

/// A JSON object's members, kept sorted by their names' code points, each name once.
///
/// Names are compared as RFC 8259 compares them, by code units, never by Swift's `String` equality (canonical
/// equivalence): `"é"` (U+00E9) and `"é"` (`e` + U+0301) are two members, and so are `"Å"`, `"Å"` and `"Å"`
/// (U+00C5, `A` + U+030A, U+212B). A name given twice keeps its last value (``init(_:)-(some Sequence)``), as
/// `JSON.parse`, Python's `json` and PostgreSQL's `jsonb` do.
///
/// Members iterate in the order livegate writes them: by UTF-8 bytes, which is code point order.
public struct JSONObject: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: String, value: JSONValue)

    private var names: [String] = []
    private var memberValues: [JSONValue] = []

    public init() {}

    /// The members given, a repeated name keeping its last value.
    public init(_ members: some Sequence<(String, JSONValue)>) {
        var pairs = Array(members)
        guard !pairs.isEmpty else { return }
        // Already in order, each name once (as livegate writes objects): taken as they are.
        let ordered = pairs.indices.dropFirst().allSatisfy { Self.compare(pairs[$0 - 1].0, pairs[$0].0) < 0 }
        if !ordered {
            // Stable, so the last of equal names is the last of its run.
            let order = pairs.indices.sorted { left, right in
                let ordered = Self.compare(pairs[left].0, pairs[right].0)
                return ordered != 0 ? ordered < 0 : left < right
            }
            pairs = order.map { pairs[$0] }
        }
        names.reserveCapacity(pairs.count)
        memberValues.reserveCapacity(pairs.count)
        for (name, value) in pairs {
            if let last = names.last, Self.compare(last, name) == 0 {
                memberValues[memberValues.count - 1] = value
            } else {
                names.append(name)
                memberValues.append(value)
            }
        }
    }

    /// The members of a dictionary (whose keys Swift has already compared as `String`s).
    public init(_ dictionary: [String: JSONValue]) {
        self.init(dictionary.lazy.map { ($0.key, $0.value) })
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    // MARK: Names

    /// `-1`, `0`, `1` as `a` sorts before, equal to or after `b`: by UTF-8 bytes (code points).
    public static func compare(_ a: String, _ b: String) -> Int {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let common = Swift.min(x.count, y.count)
                if common > 0 {
                    let ordered = memcmpBytes(x.baseAddress!, y.baseAddress!, common)
                    if ordered != 0 { return ordered }
                }
                return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
            }
        }
    }

    /// Where `name` is, or where it would go.
    private func position(of name: String) -> (index: Int, found: Bool) {
        var low = 0
        var high = names.count
        while low < high {
            let middle = (low + high) / 2
            let ordered = Self.compare(names[middle], name)
            if ordered == 0 { return (middle, true) }
            if ordered < 0 { low = middle + 1 } else { high = middle }
        }
        return (low, false)
    }

    // MARK: Members

    /// The value of member `name`; set `nil` to remove it.
    public subscript(name: String) -> JSONValue? {
        // No `found ? value : nil`: `JSONValue` takes `nil` as a literal, so that would answer `.null`.
        get {
            let (index, found) = position(of: name)
            guard found else { return Optional.none }
            return memberValues[index]
        }
        set {
            let (index, found) = position(of: name)
            if let value = newValue {
                if found {
                    memberValues[index] = value
                } else {
                    names.insert(name, at: index)
                    memberValues.insert(value, at: index)
                }
            } else if found {
                names.remove(at: index)
                memberValues.remove(at: index)
            }
        }
    }

    /// Removes member `name`, returning its value.
    @discardableResult
    public mutating func removeValue(forKey name: String) -> JSONValue? {
        let old = self[name]
        self[name] = nil
        return old
    }

    /// The names, in order.
    public var keys: [String] { names }

    /// The values, in the order of their names.
    public var values: [JSONValue] { memberValues }

    /// The same names with `transform`'s values.
    public func mapValues(_ transform: (JSONValue) throws -> JSONValue) rethrows -> JSONObject {
        var mapped = self
        mapped.memberValues = try memberValues.map(transform)
        return mapped
    }

    // MARK: Collection

    public var startIndex: Int { 0 }
    public var endIndex: Int { names.count }
    public subscript(position: Int) -> Element { (names[position], memberValues[position]) }

    // MARK: Hashable: names by their bytes

    public static func == (left: JSONObject, right: JSONObject) -> Bool {
        left.names.count == right.names.count && left.memberValues == right.memberValues
            && zip(left.names, right.names).allSatisfy { compare($0, $1) == 0 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(names.count)
        for (name, value) in zip(names, memberValues) {
            var name = name
            name.withUTF8 {
                hasher.combine($0.count)
                hasher.combine(bytes: UnsafeRawBufferPointer($0))
            }
            hasher.combine(value)
        }
    }
}

/// `memcmp`'s sign, without importing the C library into LiveJSON.
@inline(__always)
private func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Int {
    for index in 0..<count where a[index] != b[index] { return a[index] < b[index] ? -1 : 1 }
    return 0
}
