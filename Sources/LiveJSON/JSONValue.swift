// Licensed under the Apache License, Version 2.0.

/// An arbitrary JSON value: the payload of a live object, as stored in the cloud and as seen by clients.
///
/// Kept exactly as JSON has it: a number is its decimal text (``JSONNumber``: integers of any size, `1.0` a
/// float), an object's members are named by code points (``JSONObject``: `"é"` and `"é"` are two names) and
/// written sorted by them, so two equal values always encode to the same bytes.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

extension JSONValue: Codable {
    /// Through a decoder of LiveJSON's own (``JSONValueDecoder``), the value is taken exactly as parsed. Through
    /// another (Foundation's `JSONDecoder`), what that decoder gives: a number as an `Int64`, a `UInt64` or a
    /// `Double`, and an object's names merged as a `[String: …]` merges them.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? container.decode(Int64.self) {
            self = .number(JSONNumber(integer))
        } else if let integer = try? container.decode(UInt64.self) {
            self = .number(JSONNumber(integer))
        } else if let double = try? container.decode(Double.self), let number = JSONNumber(double) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else if let object = try? container.decode([String: JSONValue].self) {
            self = .object(JSONObject(object))
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a JSON value")
        }
    }

    /// Through LiveJSON's encoders (``SortedJSONEncoder``, ``JSONWriter``), the value is written exactly. Through
    /// another, a number is encoded as an `Int64` or `UInt64` when it is one, else as its nearest `Double`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let number):
            var container = encoder.singleValueContainer()
            if let integer = number.int64Value {
                try container.encode(integer)
            } else if let integer = number.uint64Value {
                try container.encode(integer)
            } else {
                try container.encode(number.doubleValue)
            }
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .object(let members):
            var container = encoder.container(keyedBy: MemberName.self)
            for (name, value) in members { try container.encode(value, forKey: MemberName(stringValue: name)) }
        }
    }
}

/// An object member's name as a coding key.
struct MemberName: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension JSONValue {
    /// The member `key` of an object, or `nil` for a missing member or a value that is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, when this value is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, when this value is a number, as its nearest `Double` (rounded beyond 2^53: see
    /// ``numberText`` and ``int64Value`` for the exact value).
    public var numberValue: Double? {
        if case .number(let value) = self { return value.doubleValue }
        return nil
    }

    /// The number, exactly, when this value is a number.
    public var exactNumber: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number's canonical text, when this value is a number.
    public var numberText: String? { exactNumber?.text }

    /// The number as an `Int64`, when this value is an integer within its range.
    public var int64Value: Int64? { exactNumber?.int64Value }

    /// The members, when this value is an object.
    public var objectValue: JSONObject? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// Whether this value is an object (the only kind of value an entity's `data` may be).
    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// A number value of an integer.
    public static func integer(_ value: some BinaryInteger) -> JSONValue { .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    public init(floatLiteral value: Double) { self = .number(JSONNumber(floatLiteral: value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
}
