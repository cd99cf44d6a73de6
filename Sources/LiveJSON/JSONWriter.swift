// Licensed under the Apache License, Version 2.0.

/// Writes compact JSON text as bytes, object members sorted by key: the same bytes Foundation's `JSONEncoder`
/// writes with `.sortedKeys` (and `.withoutEscapingSlashes` unless `escapesSlashes`), for the values it
/// takes — that equality is what the tests check.
///
/// - Strings: `"` and `\` escaped, `\b \f \n \r \t` in their short forms, every other control character as
///   `\u00xx` (lowercase hex), everything else (non-ASCII included) as it is.
/// - Numbers: integers exactly; a `Double` as its shortest round-trip form (`description`), without the
///   `.0` of an integral one (`100`, `1e+16`, `1e-07`). Not finite: refused (`JSONEncoder` refuses too).
/// - Members sorted by their keys' UTF-8 bytes (`JSONEncoder`'s order: not `String`'s, which takes `é` and
///   `e` + U+0301 as equal).
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    public let escapesSlashes: Bool

    public init(escapesSlashes: Bool = false, capacity: Int = 256) {
        self.escapesSlashes = escapesSlashes
        bytes.reserveCapacity(capacity)
    }

    /// A number that is not finite, which JSON cannot represent.
    public struct NonFiniteNumber: Error, Sendable {
        public let value: Double
    }

    public mutating func write(_ value: JSONValue) throws(NonFiniteNumber) {
        switch value {
        case .null: writeNull()
        case .bool(let flag): write(flag)
        case .number(let number):
            // As `JSONValue`'s `Encodable` conformance encodes it: integral values within 2^53 as integers.
            if number.rounded() == number, abs(number) < 9_007_199_254_740_992 {
                write(Int64(number))
            } else {
                try write(number)
            }
        case .string(let string): write(string)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                try write(item)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in Self.sortedKeys(members.keys).enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(key)
                bytes.append(UInt8(ascii: ":"))
                // Present: the key was just read from the dictionary.
                try write(members[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    public mutating func writeNull() {
        bytes.append(contentsOf: "null".utf8)
    }

    public mutating func write(_ flag: Bool) {
        bytes.append(contentsOf: flag ? "true".utf8 : "false".utf8)
    }

    public mutating func write(_ integer: some BinaryInteger) {
        bytes.append(contentsOf: String(integer).utf8)
    }

    public mutating func write(_ number: Double) throws(NonFiniteNumber) {
        guard number.isFinite else { throw NonFiniteNumber(value: number) }
        var text = number.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    public mutating func write(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var start = 0
            for (index, byte) in utf8.enumerated() {
                let escape: StaticString? =
                    switch byte {
                    case UInt8(ascii: "\""): "\\\""
                    case UInt8(ascii: "\\"): "\\\\"
                    case UInt8(ascii: "/") where escapesSlashes: "\\/"
                    case 0x08: "\\b"
                    case 0x0C: "\\f"
                    case UInt8(ascii: "\n"): "\\n"
                    case UInt8(ascii: "\r"): "\\r"
                    case UInt8(ascii: "\t"): "\\t"
                    default: nil
                    }
                guard escape != nil || byte < 0x20 else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                if let escape {
                    escape.withUTF8Buffer { bytes.append(contentsOf: $0) }
                } else {
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: "\\u00".utf8)
                    bytes.append(hex[Int(byte >> 4)])
                    bytes.append(hex[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `keys` in the order members are written: by their UTF-8 bytes.
    static func sortedKeys(_ keys: some Collection<String>) -> [String] {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Appends text that is already JSON (a punctuation mark, a member's key and colon).
    mutating func append(raw byte: UInt8) {
        bytes.append(byte)
    }
}
