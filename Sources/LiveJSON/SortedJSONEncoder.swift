// Licensed under the Apache License, Version 2.0.

/// Encodes an `Encodable` value as compact JSON with object members sorted by key (``JSONWriter``): the bytes
/// Foundation's `JSONEncoder` writes with `.sortedKeys` and `.withoutEscapingSlashes`, several times faster
/// for the messages encoded often (a ``JSONValue`` member is written as it is, with no container per member;
/// `JSONEncoder` tries each of its special types on every value).
///
/// It knows no type that `JSONEncoder` encodes in a way of its own rather than through the type's
/// `encode(to:)` (`Data` as base64, `URL` as its string, `Decimal` as a number; `Float`, whose text is
/// `Float`'s): name those in `refusing`, and a value of such a type is refused with ``Unsupported``, so the
/// caller can encode it with `JSONEncoder` instead. `Date` is encoded by its own `encode(to:)`, as
/// `JSONEncoder`'s default strategy does.
public struct SortedJSONEncoder: Sendable {
    /// A value of a type this encoder was told to refuse.
    public struct Unsupported: Error, Sendable {
        public let typeName: String
    }

    private let refused: [ObjectIdentifier]
    public let escapesSlashes: Bool

    public init(refusing refused: [Any.Type] = [], escapesSlashes: Bool = false) {
        self.refused = [ObjectIdentifier(Float.self)] + refused.map { ObjectIdentifier($0) }
        self.escapesSlashes = escapesSlashes
    }

    /// `value` as JSON text. Throws ``Unsupported``, or ``JSONWriter/NonFiniteNumber`` for a `Double` that is
    /// not finite, or what the value's `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let node = try TreeEncoder.box(value, codingPath: [], refused: refused)
        var writer = JSONWriter(escapesSlashes: escapesSlashes)
        try node.write(into: &writer)
        return writer.bytes
    }
}

/// A value being encoded. Containers are references, so that one handed out can be filled after it was
/// placed in its parent.
private enum Node {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case value(JSONValue)
    case array(ArrayStorage)
    case object(ObjectStorage)
    /// What a super encoder encoded, known once the caller is done with it.
    case deferred(TreeEncoder)

    func write(into writer: inout JSONWriter) throws {
        switch self {
        case .null: writer.writeNull()
        case .bool(let flag): writer.write(flag)
        case .int(let integer): writer.write(integer)
        case .uint(let integer): writer.write(integer)
        case .double(let number): try writer.write(number)
        case .string(let string): writer.write(string)
        case .value(let value): try writer.write(value)
        case .array(let storage): try writer.writeArray(storage.items) { try $1.write(into: &$0) }
        case .object(let storage): try writer.writeObject(storage.members) { try $1.write(into: &$0) }
        case .deferred(let encoder):
            // A super encoder nothing was encoded with stands for an empty object, as in `JSONEncoder`.
            try (encoder.node ?? .object(ObjectStorage())).write(into: &writer)
        }
    }
}

private final class ArrayStorage {
    var items: [Node] = []
}

private final class ObjectStorage {
    var members: [String: Node] = [:]
}

private final class TreeEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let refused: [ObjectIdentifier]
    var node: Node?

    init(codingPath: [any CodingKey], refused: [ObjectIdentifier]) {
        self.codingPath = codingPath
        self.refused = refused
    }

    /// `value` as a node: the standard library's scalars and ``JSONValue`` directly (compared by type, no
    /// cast tried in turn), anything else through its own `encode(to:)`.
    static func box<T: Encodable>(_ value: T, codingPath: [any CodingKey], refused: [ObjectIdentifier]) throws -> Node {
        if T.self == JSONValue.self { return .value(value as! JSONValue) }
        if T.self == String.self { return .string(value as! String) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Double.self { return .double(value as! Double) }
        if refused.contains(ObjectIdentifier(T.self)) { throw SortedJSONEncoder.Unsupported(typeName: "\(T.self)") }
        let encoder = TreeEncoder(codingPath: codingPath, refused: refused)
        try value.encode(to: encoder)
        // A value that encoded nothing is an empty object, as in `JSONEncoder`.
        return encoder.node ?? .object(ObjectStorage())
    }

    func box<T: Encodable>(_ value: T, at key: any CodingKey) throws -> Node {
        try Self.box(value, codingPath: codingPath + [key], refused: refused)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let storage: ObjectStorage
        if case .object(let existing)? = node {
            storage = existing
        } else {
            storage = ObjectStorage()
            node = .object(storage)
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, storage: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let storage: ArrayStorage
        if case .array(let existing)? = node {
            storage = existing
        } else {
            storage = ArrayStorage()
            node = .array(storage)
        }
        return UnkeyedContainer(encoder: self, storage: storage, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: self)
    }
}

private struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

private struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: TreeEncoder
    let storage: ObjectStorage
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) { storage.members[key.stringValue] = .null }
    mutating func encode(_ value: Bool, forKey key: Key) { storage.members[key.stringValue] = .bool(value) }
    mutating func encode(_ value: String, forKey key: Key) { storage.members[key.stringValue] = .string(value) }
    mutating func encode(_ value: Double, forKey key: Key) { storage.members[key.stringValue] = .double(value) }
    mutating func encode(_ value: Int, forKey key: Key) { storage.members[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) { storage.members[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) { storage.members[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) { storage.members[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) { storage.members[key.stringValue] = .int(value) }
    mutating func encode(_ value: UInt, forKey key: Key) { storage.members[key.stringValue] = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) { storage.members[key.stringValue] = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) { storage.members[key.stringValue] = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) { storage.members[key.stringValue] = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) { storage.members[key.stringValue] = .uint(value) }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        throw SortedJSONEncoder.Unsupported(typeName: "Float")
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        storage.members[key.stringValue] = try encoder.box(value, at: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectStorage()
        storage.members[key.stringValue] = .object(nested)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, storage: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = ArrayStorage()
        storage.members[key.stringValue] = .array(nested)
        return UnkeyedContainer(encoder: encoder, storage: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        superEncoder(named: "super", key: SuperKey())
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(named: key.stringValue, key: key)
    }

    private func superEncoder(named name: String, key: any CodingKey) -> any Encoder {
        let nested = TreeEncoder(codingPath: codingPath + [key], refused: encoder.refused)
        storage.members[name] = .deferred(nested)
        return nested
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: TreeEncoder
    let storage: ArrayStorage
    let codingPath: [any CodingKey]
    var count: Int { storage.items.count }

    private var nextKey: IndexKey { IndexKey(intValue: storage.items.count) }

    mutating func encodeNil() { storage.items.append(.null) }
    mutating func encode(_ value: Bool) { storage.items.append(.bool(value)) }
    mutating func encode(_ value: String) { storage.items.append(.string(value)) }
    mutating func encode(_ value: Double) { storage.items.append(.double(value)) }
    mutating func encode(_ value: Int) { storage.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) { storage.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) { storage.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) { storage.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) { storage.items.append(.int(value)) }
    mutating func encode(_ value: UInt) { storage.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) { storage.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) { storage.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) { storage.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) { storage.items.append(.uint(value)) }

    mutating func encode(_ value: Float) throws {
        throw SortedJSONEncoder.Unsupported(typeName: "Float")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        storage.items.append(try encoder.box(value, at: nextKey))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectStorage()
        let path = codingPath + [nextKey]
        storage.items.append(.object(nested))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, storage: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = ArrayStorage()
        let path = codingPath + [nextKey]
        storage.items.append(.array(nested))
        return UnkeyedContainer(encoder: encoder, storage: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let nested = TreeEncoder(codingPath: codingPath + [nextKey], refused: encoder.refused)
        storage.items.append(.deferred(nested))
        return nested
    }
}

private struct SingleValueContainer: SingleValueEncodingContainer {
    let encoder: TreeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() { encoder.node = .null }
    mutating func encode(_ value: Bool) { encoder.node = .bool(value) }
    mutating func encode(_ value: String) { encoder.node = .string(value) }
    mutating func encode(_ value: Double) { encoder.node = .double(value) }
    mutating func encode(_ value: Int) { encoder.node = .int(Int64(value)) }
    mutating func encode(_ value: Int8) { encoder.node = .int(Int64(value)) }
    mutating func encode(_ value: Int16) { encoder.node = .int(Int64(value)) }
    mutating func encode(_ value: Int32) { encoder.node = .int(Int64(value)) }
    mutating func encode(_ value: Int64) { encoder.node = .int(value) }
    mutating func encode(_ value: UInt) { encoder.node = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt8) { encoder.node = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt16) { encoder.node = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt32) { encoder.node = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt64) { encoder.node = .uint(value) }

    mutating func encode(_ value: Float) throws {
        throw SortedJSONEncoder.Unsupported(typeName: "Float")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.node = try TreeEncoder.box(value, codingPath: encoder.codingPath, refused: encoder.refused)
    }
}
