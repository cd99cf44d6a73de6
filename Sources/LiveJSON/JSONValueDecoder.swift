// Licensed under the Apache License, Version 2.0.

/// Decodes a `Decodable` value from a parsed ``JSONValue`` (see ``JSONValue/init(parsing:)-(String)``):
/// with ``JSONValue/parse(_:as:)``, a faster path than `JSONDecoder` for messages read often. A `JSONValue`
/// member is taken as it is (no kind tried in turn), exactly as parsed. An integer type takes an integer
/// within its range (no fraction); a `Double` takes any number, rounded to the nearest.
public enum JSONValueDecoder {
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try ValueDecoder(value, codingPath: []).decodeValue(type)
    }
}

extension JSONValue {
    /// Parses `text` and decodes a `T` from it (``JSONValue/init(parsing:)-(String)``, ``JSONValueDecoder``).
    public static func parse<T: Decodable>(_ text: String, as type: T.Type) throws -> T {
        try JSONValueDecoder.decode(type, from: JSONValue(parsing: text))
    }
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        stringValue = "\(intValue)"
        self.intValue = intValue
    }
}

private struct ValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONValue, codingPath: [any CodingKey]) {
        self.value = value
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch(JSONObject.self) }
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self) }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleValueContainer(decoder: self) }

    func mismatch(_ type: Any.Type) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Expected \(type), found \(value)"))
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self, let value = value as? T { return value }
        switch type {
        case is Bool.Type:
            guard case .bool(let bool) = value else { throw mismatch(type) }
            return bool as! T
        case is String.Type:
            guard case .string(let string) = value else { throw mismatch(type) }
            return string as! T
        case is Double.Type:
            guard case .number(let number) = value else { throw mismatch(type) }
            return number.doubleValue as! T
        case is Float.Type:
            guard case .number(let number) = value else { throw mismatch(type) }
            return Float(number.doubleValue) as! T
        case is Int.Type: return try integer(Int.self) as! T
        case is Int64.Type: return try integer(Int64.self) as! T
        case is Int32.Type: return try integer(Int32.self) as! T
        case is Int16.Type: return try integer(Int16.self) as! T
        case is Int8.Type: return try integer(Int8.self) as! T
        case is UInt.Type: return try integer(UInt.self) as! T
        case is UInt64.Type: return try integer(UInt64.self) as! T
        case is UInt32.Type: return try integer(UInt32.self) as! T
        case is UInt16.Type: return try integer(UInt16.self) as! T
        case is UInt8.Type: return try integer(UInt8.self) as! T
        default: return try T(from: self)
        }
    }

    /// An exact integer within the type's range (a fraction of zeros allowed: `3.0` is 3).
    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        guard case .number(let number) = value else { throw mismatch(type) }
        guard let integer = number.integerValue(I.self) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(number) is not an exact \(type)"))
        }
        return integer
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: JSONObject
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    func member(_ key: Key) throws -> JSONValue {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No member \"\(key.stringValue)\""))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let value = members[key.stringValue] else { return true }
        return value == .null
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let value = try member(key)
        if value == .null, T.self != JSONValue.self {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [key], debugDescription: "null"))
        }
        return try ValueDecoder(value, codingPath: codingPath + [key]).decodeValue(type)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = members[key.stringValue], value != .null else { return nil }
        return try ValueDecoder(value, codingPath: codingPath + [key]).decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(try member(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(try member(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { try superDecoder(forKey: Key(stringValue: "super")!) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next() throws -> ValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                JSONValue.self,
                .init(codingPath: codingPath + [AnyKey(intValue: currentIndex)], debugDescription: "Unkeyed container is at end")
            )
        }
        defer { currentIndex += 1 }
        return ValueDecoder(elements[currentIndex], codingPath: codingPath + [AnyKey(intValue: currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = try next()
        if decoder.value == .null, T.self != JSONValue.self {
            throw DecodingError.valueNotFound(type, .init(codingPath: decoder.codingPath, debugDescription: "null"))
        }
        return try decoder.decodeValue(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}

private struct SingleValueContainer: SingleValueDecodingContainer {
    let decoder: ValueDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.value == .null }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if decoder.value == .null, T.self != JSONValue.self {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath, debugDescription: "null"))
        }
        return try decoder.decodeValue(type)
    }
}
