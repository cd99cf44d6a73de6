// Licensed under the Apache License, Version 2.0.

/// Writes compact JSON text as bytes, object members sorted by key: the same bytes Foundation's `JSONEncoder`
/// writes with `.sortedKeys` (and `.withoutEscapingSlashes` unless `escapesSlashes`), for the values it
/// takes — that equality is what the tests check.
///
/// - Strings: `"` and `\` escaped, `\b \f \n \r \t` in their short forms, every other control character as
///   `\u00xx` (lowercase hex), everything else (non-ASCII included) as it is.
/// - Numbers: a ``JSONNumber`` as its canonical text; integers exactly; a `Double` (a Swift value encoded, not
///   a JSON value) as its shortest round-trip form (`description`), without the `.0` of an integral one
///   (`100`, `1e+16`, `1e-07`), as `JSONEncoder` writes it. Not finite: refused (`JSONEncoder` refuses too).
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
        case .number(let number): write(number)
        case .string(let string): write(string)
        case .array(let items): try writeArray(items) { (writer, item) throws(NonFiniteNumber) in try writer.write(item) }
        case .object(let members):
            // Already in order (``JSONObject`` keeps its members sorted by their names' bytes).
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(member.key)
                bytes.append(UInt8(ascii: ":"))
                try write(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// A number exactly: its canonical text (``JSONNumber``).
    public mutating func write(_ number: JSONNumber) {
        bytes.append(contentsOf: number.text.utf8)
    }

    /// `items` as an array, each written by `writeItem`.
    mutating func writeArray<Item, Failure>(
        _ items: [Item],
        _ writeItem: (inout JSONWriter, Item) throws(Failure) -> Void
    ) throws(Failure) {
        bytes.append(UInt8(ascii: "["))
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            try writeItem(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `members` as an object, sorted by their keys' UTF-8 bytes, each value written by `writeValue`.
    mutating func writeObject<Value, Failure>(
        _ members: [String: Value],
        _ writeValue: (inout JSONWriter, Value) throws(Failure) -> Void
    ) throws(Failure) {
        bytes.append(UInt8(ascii: "{"))
        // The members sorted with their values (no lookup of each key again); one needs no sorting.
        let sorted = members.count < 2 ? Array(members) : members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        for (index, member) in sorted.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            write(member.key)
            bytes.append(UInt8(ascii: ":"))
            try writeValue(&self, member.value)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// For a type written member by member, in the order ``write(_:)-(JSONValue)`` would sort its keys: `{`,
    /// then ``writeKey(_:first:)`` before each value, then ``endObject()``.
    public mutating func beginObject() {
        bytes.append(UInt8(ascii: "{"))
    }

    /// `"key":`, after a `,` unless `first`.
    public mutating func writeKey(_ key: String, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        write(key)
        bytes.append(UInt8(ascii: ":"))
    }

    /// ``writeKey(_:first:)`` of a key written in the program: its bytes as they are, not scanned for what to
    /// escape (a notification's eight keys were a fifth of its encoding). `key` must have nothing to escape: ASCII
    /// from space on, no `"`, `\` or `/` (checked in debug builds).
    public mutating func writeKey(literal key: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { utf8 in
            assert(
                utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "/") },
                "a literal key with something to escape"
            )
            bytes.append(contentsOf: utf8)
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func writeNull() {
        bytes.append(contentsOf: "null".utf8)
    }

    public mutating func write(_ flag: Bool) {
        bytes.append(contentsOf: flag ? "true".utf8 : "false".utf8)
    }

    public mutating func write(_ integer: some BinaryInteger) {
        if let value = Int64(exactly: integer) {
            write(value)
        } else {
            bytes.append(contentsOf: String(integer).utf8)
        }
    }

    /// An `Int64`'s decimal digits written straight into the bytes (`String(integer)` made a string per number:
    /// a token, an id and a version in every answer and notification).
    public mutating func write(_ integer: Int64) {
        if integer < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = integer.magnitude
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude))
            return
        }
        // At most 20 digits (UInt64.max), written from the last.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    public mutating func write(_ integer: Int) {
        write(Int64(integer))
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
        // `"` again when slashes are not escaped: the scan looks for nothing more.
        let slash = escapesSlashes ? UInt8(ascii: "/") : UInt8(ascii: "\"")
        string.withUTF8 { utf8 in
            let raw = UnsafeRawBufferPointer(utf8)
            var start = 0
            while true {
                // Nearly every byte is written as it is: runs of them, found eight bytes at a time, appended at once.
                let index = StringByteScan.firstFlagged(in: raw, from: start, extra: slash).index
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                guard index < utf8.count else { break }
                let byte = utf8[index]
                start = index + 1
                let escape: StaticString? =
                    switch byte {
                    case UInt8(ascii: "\""): "\\\""
                    case UInt8(ascii: "\\"): "\\\\"
                    case UInt8(ascii: "/"): "\\/"
                    case 0x08: "\\b"
                    case 0x0C: "\\f"
                    case UInt8(ascii: "\n"): "\\n"
                    case UInt8(ascii: "\r"): "\\r"
                    case UInt8(ascii: "\t"): "\\t"
                    default: nil
                    }
                if let escape {
                    escape.withUTF8Buffer { bytes.append(contentsOf: $0) }
                } else {
                    bytes.append(contentsOf: "\\u00".utf8)
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0x0F)])
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
