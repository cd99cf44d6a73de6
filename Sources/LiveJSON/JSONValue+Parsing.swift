// Licensed under the Apache License, Version 2.0.

/// Why a document could not be parsed: what was expected, and the byte offset where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public let offset: Int
    /// The document is nested deeper than ``JSONValue/maxParsingDepth`` (it may be valid JSON all the same).
    public var isDepthLimit = false
    /// A number is longer, written out, than ``JSONNumber/maxTextLength`` (valid JSON all the same).
    public var isNumberLimit = false

    public init(message: String, offset: Int, isDepthLimit: Bool = false, isNumberLimit: Bool = false) {
        self.message = message
        self.offset = offset
        self.isDepthLimit = isDepthLimit
        self.isNumberLimit = isNumberLimit
    }

    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    /// The deepest nesting of arrays and objects accepted (as Foundation's `JSONDecoder`).
    public static let maxParsingDepth = 512

    /// Parses one JSON document (RFC 8259, UTF-8): strict, with nothing but whitespace after the value.
    ///
    /// Faster than decoding a `JSONValue` through `JSONDecoder`, whose `Decodable` conformance must try each
    /// kind in turn and pays a thrown error for every miss. Numbers are kept exactly (``JSONNumber``, in its
    /// canonical form); a name given twice in an object keeps its last value (``JSONObject``).
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let parsed =
            bytes.withContiguousStorageIfAvailable { Self.parse(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { Self.parse($0) }
        self = try parsed.get()
    }

    /// ``init(parsing:)-(some Collection<UInt8>)`` of bytes in place, with no generic hop (a caller in another
    /// module reaches the generic one unspecialised).
    public init(parsing bytes: UnsafeRawBufferPointer) throws(JSONParseError) {
        self = try Self.parse(bytes).get()
    }

    /// Parses one JSON document held in `text`.
    public init(parsing text: String) throws(JSONParseError) {
        var text = text
        self = try text.withUTF8 { Self.parse(UnsafeRawBufferPointer($0)) }.get()
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<JSONValue, JSONParseError> {
        var parser = Parser(bytes)
        do throws(JSONParseError) { return .success(try parser.document()) } catch { return .failure(error) }
    }
}

/// A recursive-descent parser over UTF-8 bytes in place (``JSONReader`` reads with it too).
struct Parser {
    let bytes: UnsafeRawBufferPointer
    var offset = 0
    var depth = 0
    /// The members of the objects being read, innermost last (see `object()`).
    var pendingMembers: [Member] = []

    /// A member read, not yet in its object (a struct: a tuple's metadata was looked up at run time).
    struct Member {
        var key: String
        var value: JSONValue
    }

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func document() throws(JSONParseError) -> JSONValue {
        let value = try self.value()
        skipWhitespace()
        guard offset == bytes.count else { throw fail("unexpected content after the value") }
        return value
    }

    func fail(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: offset) }

    mutating func skipWhitespace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x09, 0x0A, 0x0D: offset += 1
            default: return
            }
        }
    }

    mutating func value() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard offset < bytes.count else { throw fail("expected a value") }
        switch bytes[offset] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw fail("expected a value")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - offset >= count else { throw fail("expected \(word)") }
        for index in 0..<count where bytes[offset + index] != word.utf8Start[index] { throw fail("expected \(word)") }
        offset += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        guard depth <= JSONValue.maxParsingDepth else {
            throw JSONParseError(message: "nested deeper than \(JSONValue.maxParsingDepth) levels", offset: offset, isDepthLimit: true)
        }
    }

    mutating func object() throws(JSONParseError) -> JSONValue {
        try enter()
        offset += 1
        skipWhitespace()
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
            offset += 1
            depth -= 1
            return .object(JSONObject())
        }
        // The members are gathered on `pendingMembers` (a stack that nested objects use above this one's), then
        // made an object at once (sorted by name once, when they were not written in order).
        let base = pendingMembers.count
        while true {
            skipWhitespace()
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let key = try string()
            skipWhitespace()
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            offset += 1
            pendingMembers.append(Member(key: key, value: try value()))
            skipWhitespace()
            guard offset < bytes.count else { throw fail("expected ',' or '}'") }
            if bytes[offset] == UInt8(ascii: ",") {
                offset += 1
            } else if bytes[offset] == UInt8(ascii: "}") {
                offset += 1
                depth -= 1
                let members = JSONObject(pendingMembers[base...].lazy.map { ($0.key, $0.value) })
                pendingMembers.removeLast(pendingMembers.count - base)
                return .object(members)
            } else {
                throw fail("expected ',' or '}'")
            }
        }
    }

    mutating func array() throws(JSONParseError) -> JSONValue {
        try enter()
        offset += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") {
            offset += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try value())
            skipWhitespace()
            guard offset < bytes.count else { throw fail("expected ',' or ']'") }
            if bytes[offset] == UInt8(ascii: ",") {
                offset += 1
            } else if bytes[offset] == UInt8(ascii: "]") {
                offset += 1
                depth -= 1
                return .array(elements)
            } else {
                throw fail("expected ',' or ']'")
            }
        }
    }

    /// A string, from its opening quote; validated as UTF-8.
    mutating func string() throws(JSONParseError) -> String {
        offset += 1
        let start = offset
        // The common case, no escapes: read in place, its end found eight bytes at a time. None of its bytes'
        // high bit set, the string is ASCII, which needs no validating (nearly every key and most values;
        // `String(validating:as:)` cost a third of the parse).
        let (end, nonASCII) = StringByteScan.firstFlagged(in: bytes, from: start, extra: UInt8(ascii: "\""))
        offset = end
        guard offset < bytes.count else { throw fail("unterminated string") }
        switch bytes[offset] {
        case UInt8(ascii: "\""):
            let text = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
            let string: String
            if !nonASCII {
                string = String(decoding: text, as: UTF8.self)
            } else {
                guard let validated = String(validating: text, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
                string = validated
            }
            offset += 1
            return string
        case UInt8(ascii: "\\"):
            break
        default:
            throw fail("unescaped control character in a string")
        }
        var utf8 = Array(bytes[start..<offset])
        while offset < bytes.count {
            let byte = bytes[offset]
            switch byte {
            case UInt8(ascii: "\""):
                offset += 1
                guard let string = String(validating: utf8, as: UTF8.self) else { throw fail("invalid UTF-8 in a string") }
                return string
            case UInt8(ascii: "\\"):
                offset += 1
                guard offset < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[offset]
                offset += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): utf8.append(contentsOf: try unicodeEscape())
                default: throw fail("invalid escape")
                }
            default:
                guard byte >= 0x20 else { throw fail("unescaped control character in a string") }
                utf8.append(byte)
                offset += 1
            }
        }
        throw fail("unterminated string")
    }

    /// After `\u`: the code point (a surrogate pair takes a second `\u`), as UTF-8.
    mutating func unicodeEscape() throws(JSONParseError) -> [UInt8] {
        var code = try hex4()
        if (0xD800...0xDBFF).contains(code) {
            guard bytes.count - offset >= 2, bytes[offset] == UInt8(ascii: "\\"), bytes[offset + 1] == UInt8(ascii: "u") else {
                throw fail("a high surrogate without its low surrogate")
            }
            offset += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail("a high surrogate without its low surrogate") }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(code) {
            throw fail("a low surrogate without its high surrogate")
        }
        guard let scalar = Unicode.Scalar(code) else { throw fail("invalid code point") }
        return Array(String(Character(scalar)).utf8)
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - offset >= 4 else { throw fail("expected four hex digits") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("expected four hex digits")
            }
            code = code << 4 | UInt32(digit)
            offset += 1
        }
        return code
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept exactly (``JSONNumber``).
    mutating func number() throws(JSONParseError) -> JSONNumber {
        let start = offset
        if bytes[offset] == UInt8(ascii: "-") { offset += 1 }
        guard offset < bytes.count, isDigit(bytes[offset]) else { throw fail("expected a digit") }
        if bytes[offset] == UInt8(ascii: "0") {
            offset += 1
        } else {
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        }
        var integral = true
        if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
            integral = false
            offset += 1
            guard offset < bytes.count, isDigit(bytes[offset]) else { throw fail("expected a digit after '.'") }
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
            integral = false
            offset += 1
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            guard offset < bytes.count, isDigit(bytes[offset]) else { throw fail("expected a digit in the exponent") }
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        }
        let text = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
        return try JSONNumber.canonical(text, at: start).get()
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
