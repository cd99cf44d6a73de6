// Licensed under the Apache License, Version 2.0.

/// A pull reader of one JSON document, on its UTF-8 bytes in place: for a decoder that knows the shape it expects
/// and reads the members it knows one by one, with no tree of dictionaries for the parts it reads itself (a
/// realtime event's envelope and entity). The grammar, the depth limit and the strings are the parser's of
/// ``JSONValue/init(parsing:)-(String)``; what it reads as a whole value (``value()``) that parser builds.
///
/// Every read throws when the document is not what it asked for (a string where a number was asked, say) as well
/// as when it is not JSON: a decoder gives up on either, and leaves the document to a general decoder.
public struct JSONReader {
    private var parser: Parser

    private init(_ bytes: UnsafeRawBufferPointer) { parser = Parser(bytes) }

    /// Runs `body` with a reader of `text`; `nil` when it returns `nil` or any read throws. The reader and the
    /// names it gives are valid only inside `body`.
    public static func read<T>(_ text: String, _ body: (inout JSONReader) throws(JSONParseError) -> T?) -> T? {
        var text = text
        return text.withUTF8 { read(bytes: UnsafeRawBufferPointer($0), body) }
    }

    /// Runs `body` with a reader of `bytes` (a frame as it came), as ``read(_:_:)`` does. The names it gives are
    /// not checked as UTF-8: compare them with ``name(_:is:)`` only; the strings it reads are checked.
    public static func read<T>(bytes: UnsafeRawBufferPointer, _ body: (inout JSONReader) throws(JSONParseError) -> T?) -> T? {
        var reader = JSONReader(bytes)
        do throws(JSONParseError) { return try body(&reader) } catch { return nil }
    }

    /// The first byte of the next value (whitespace skipped, nothing read): `"` for a string, `n` for `null`,
    /// and so on; `nil` at the end.
    public mutating func peek() -> UInt8? {
        parser.skipWhitespace()
        return parser.offset < parser.bytes.count ? parser.bytes[parser.offset] : nil
    }

    /// Reads an object's `{`: `true` when a member follows (read its ``name()``, then its value), `false` when the
    /// object is empty (its `}` read too).
    public mutating func enterObject() throws(JSONParseError) -> Bool {
        try expect(UInt8(ascii: "{"), "expected an object")
        try parser.enter()
        parser.offset += 1
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count, parser.bytes[parser.offset] == UInt8(ascii: "}") else { return true }
        parser.offset += 1
        parser.depth -= 1
        return false
    }

    /// A member's name, and the `:` after it: its UTF-8 bytes, valid only inside ``read(_:_:)``'s body. `nil` for a
    /// name with an escape (its bytes are not its text), with the reader left inside the name: give up the read.
    /// The bytes are not checked as UTF-8 (``read(_:_:)``'s text is valid UTF-8); compare them with ``name(_:is:)``.
    public mutating func name() throws(JSONParseError) -> UnsafeRawBufferPointer? {
        try expect(UInt8(ascii: "\""), "expected a member name")
        let start = parser.offset + 1
        var end = start
        while true {
            guard end < parser.bytes.count else { throw parser.fail("unterminated string") }
            let byte = parser.bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") { return nil }
            guard byte >= 0x20 else { throw parser.fail("unescaped control character in a string") }
            end += 1
        }
        parser.offset = end + 1
        try expect(UInt8(ascii: ":"), "expected ':'")
        parser.offset += 1
        return UnsafeRawBufferPointer(rebasing: parser.bytes[start..<end])
    }

    /// After a member's value: `true` when another member follows, `false` when the object ends (its `}` read).
    public mutating func nextMember() throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count else { throw parser.fail("expected ',' or '}'") }
        switch parser.bytes[parser.offset] {
        case UInt8(ascii: ","):
            parser.offset += 1
            parser.skipWhitespace()
            return true
        case UInt8(ascii: "}"):
            parser.offset += 1
            parser.depth -= 1
            return false
        default:
            throw parser.fail("expected ',' or '}'")
        }
    }

    /// A string value.
    public mutating func string() throws(JSONParseError) -> String {
        try expect(UInt8(ascii: "\""), "expected a string")
        return try parser.string()
    }

    /// A number value, as ``JSONValue/number(_:)`` holds it.
    public mutating func number() throws(JSONParseError) -> JSONNumber {
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count,
            parser.bytes[parser.offset] == UInt8(ascii: "-") || parser.isDigit(parser.bytes[parser.offset])
        else { throw parser.fail("expected a number") }
        return try parser.number()
    }

    /// `true` or `false`.
    public mutating func bool() throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count else { throw parser.fail("expected true or false") }
        switch parser.bytes[parser.offset] {
        case UInt8(ascii: "t"):
            try parser.literal("true")
            return true
        case UInt8(ascii: "f"):
            try parser.literal("false")
            return false
        default:
            throw parser.fail("expected true or false")
        }
    }

    /// Reads `null` if it is next: `true` when it was.
    public mutating func null() throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count, parser.bytes[parser.offset] == UInt8(ascii: "n") else { return false }
        try parser.literal("null")
        return true
    }

    /// Any value, as ``JSONValue/init(parsing:)-(String)`` parses it (within the depth already entered).
    public mutating func value() throws(JSONParseError) -> JSONValue {
        try parser.value()
    }

    /// The document's end: nothing but whitespace is left.
    public mutating func end() throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.offset == parser.bytes.count else { throw parser.fail("unexpected content after the value") }
    }

    /// Whether a name read by ``name()`` is `word`.
    public static func name(_ name: UnsafeRawBufferPointer, is word: StaticString) -> Bool {
        name.count == word.utf8CodeUnitCount && name.elementsEqual(UnsafeRawBufferPointer(start: word.utf8Start, count: name.count))
    }

    /// Skips whitespace; throws unless `byte` is next (left unread).
    private mutating func expect(_ byte: UInt8, _ message: String) throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.offset < parser.bytes.count, parser.bytes[parser.offset] == byte else { throw parser.fail(message) }
    }
}
