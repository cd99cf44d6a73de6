// Licensed under the Apache License, Version 2.0.

/// A JSON number kept exactly: its decimal text in livegate's canonical form, never a rounded `Double`.
///
/// The canonical form is `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, with no exponent and no negative zero:
/// - An integer (no fraction, no exponent) is kept as written, of any size: `9007199254740993`,
///   `-123123123123123123123123123123`.
/// - A number with a fraction is kept as written, trailing zeros included: `1.0`, `1.50`.
/// - A number with an exponent is written out as the same value with a fraction of at least one digit:
///   `1E6` is `1000000.0`, `1.5e-3` is `0.0015`, `2.50E1` is `25.0`. It stays a float.
/// - `-0`, `-0.0` are `0`, `0.0`: JSON numbers are decimal values, and zero has no sign.
///
/// Every part of livegate writes this form, and PostgreSQL's `numeric` (inside `jsonb`) prints it back as it
/// is, so a number reads back the same from the daemon, the cloud on either store, and its cache.
///
/// Equality is of the text (`1.0 != 1`: they write back differently); ``compareValue(_:)`` compares values
/// exactly (`1.0` equals `1`, `9007199254740993` is above `9007199254740992`).
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The canonical text.
    public let text: String

    /// The longest canonical text accepted: a number whose exponent writes it out longer is refused
    /// (``JSONParseError``); every finite `Double`, written out, is shorter.
    public static let maxTextLength = 1_100

    private init(canonical text: String) { self.text = text }

    public var description: String { text }

    /// An integer: no fraction (in the canonical form, no `.`).
    public var isInteger: Bool { !text.utf8.contains(UInt8(ascii: ".")) }

    /// The value as an `Int64`, when it is an integer within `Int64`'s range; `nil` otherwise.
    public var int64Value: Int64? {
        guard isInteger else { return nil }
        return Int64(text)
    }

    /// The value as a `UInt64`, when it is a non-negative integer within `UInt64`'s range.
    public var uint64Value: UInt64? {
        guard isInteger else { return nil }
        return UInt64(text)
    }

    /// The value as an `I`, when it is an integer (a fraction of zeros allowed: `3.0` is 3) within `I`'s range.
    public func integerValue<I: FixedWidthInteger>(_ type: I.Type) -> I? {
        guard let point = text.utf8.firstIndex(of: UInt8(ascii: ".")) else { return I(text) }
        guard text.utf8[text.utf8.index(after: point)...].allSatisfy({ $0 == UInt8(ascii: "0") }) else { return nil }
        return I(Substring(text.utf8[..<point]))
    }

    /// The nearest `Double` (rounded beyond 2^53; infinite beyond `Double`'s range).
    public var doubleValue: Double { Double(text) ?? .nan }

    /// An integer of any width.
    public init(_ integer: some BinaryInteger) {
        text = String(integer)
    }

    /// A float: `Double`'s shortest round-trip form, written out (`1.0`, `1e16` as `10000000000000000.0`).
    /// `nil` for a value that is not finite.
    public init?(_ double: Double) {
        guard double.isFinite else { return nil }
        guard let number = try? JSONNumber(validating: double.description) else { return nil }
        self = number
    }

    /// A number from JSON number text (RFC 8259's grammar), in the canonical form. Throws for text that is
    /// not a JSON number, or that written out would be longer than ``maxTextLength``.
    public init(validating text: String) throws(JSONParseError) {
        var text = text
        let parsed = text.withUTF8 { Self.canonical(UnsafeRawBufferPointer($0)) }
        self = try parsed.get()
    }

    /// The canonical number of JSON number text already matched by the parser's grammar.
    static func canonical(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> Result<JSONNumber, JSONParseError> {
        func fail(_ message: String) -> Result<JSONNumber, JSONParseError> {
            .failure(JSONParseError(message: message, offset: offset))
        }
        func tooLong() -> Result<JSONNumber, JSONParseError> {
            .failure(
                JSONParseError(
                    message: "a number longer than \(maxTextLength) characters written out without an exponent",
                    offset: offset,
                    isNumberLimit: true
                )
            )
        }
        let count = bytes.count
        var index = 0
        let negative = count > 0 && bytes[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        let integerStart = index
        while index < count, isDigit(bytes[index]) { index += 1 }
        let integerEnd = index
        guard integerEnd > integerStart else { return fail("expected a digit") }
        guard bytes[integerStart] != UInt8(ascii: "0") || integerEnd - integerStart == 1 else { return fail("a leading zero") }
        var fractionStart = index
        var fractionEnd = index
        if index < count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            fractionStart = index
            while index < count, isDigit(bytes[index]) { index += 1 }
            fractionEnd = index
            guard fractionEnd > fractionStart else { return fail("expected a digit after '.'") }
        }
        var hasExponent = false
        var exponentNegative = false
        var exponent = 0
        if index < count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            hasExponent = true
            index += 1
            if index < count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            let exponentStart = index
            while index < count, isDigit(bytes[index]) {
                // Beyond this the number is refused anyway; the cap keeps the sum from overflowing.
                if exponent < 1_000_000_000 { exponent = exponent * 10 + Int(bytes[index] - UInt8(ascii: "0")) }
                index += 1
            }
            guard index > exponentStart else { return fail("expected a digit in the exponent") }
            if exponentNegative { exponent = -exponent }
        }
        guard index == count else { return fail("not a number") }

        let allZero = !bytes[integerStart..<fractionEnd].contains { $0 != UInt8(ascii: "0") && $0 != UInt8(ascii: ".") }
        if !hasExponent {
            // As written, but for the sign of a zero.
            let from = negative && allZero ? 1 : 0
            guard count - from <= maxTextLength else { return tooLong() }
            return .success(JSONNumber(canonical: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[from..<count]), as: UTF8.self)))
        }

        // With an exponent: digits × 10^scale, written out with at least one fraction digit.
        var digits: [UInt8] = []
        digits.reserveCapacity(fractionEnd - integerStart)
        digits.append(contentsOf: bytes[integerStart..<integerEnd])
        digits.append(contentsOf: bytes[fractionStart..<fractionEnd])
        let power = exponent - (fractionEnd - fractionStart)
        // The digits of the integer part: those before the point, and zeros for a positive power.
        let fractionDigits = max(1, -power)
        let integerDigits = max(0, digits.count + power)
        guard integerDigits + fractionDigits + 2 <= maxTextLength else { return tooLong() }
        var out: [UInt8] = []
        out.reserveCapacity(integerDigits + fractionDigits + 3)
        if negative && !allZero { out.append(UInt8(ascii: "-")) }
        if power >= 0 {
            out.append(contentsOf: digits)
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: power))
            out.append(UInt8(ascii: "."))
            out.append(UInt8(ascii: "0"))
        } else if integerDigits > 0 {
            out.append(contentsOf: digits[0..<integerDigits])
            out.append(UInt8(ascii: "."))
            out.append(contentsOf: digits[integerDigits...])
        } else {
            out.append(UInt8(ascii: "0"))
            out.append(UInt8(ascii: "."))
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: fractionDigits - digits.count))
            out.append(contentsOf: digits)
        }
        // No leading zeros in the integer part (keep one before the point).
        let sign = out.first == UInt8(ascii: "-") ? 1 : 0
        var firstKept = sign
        while out[firstKept] == UInt8(ascii: "0"), out[firstKept + 1] != UInt8(ascii: ".") { firstKept += 1 }
        if firstKept > sign { out.removeSubrange(sign..<firstKept) }
        return .success(JSONNumber(canonical: String(decoding: out, as: UTF8.self)))
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// Compares the two values exactly: `-1`, `0` or `1` as `self` is below, equal to or above `other`.
    /// Integers and floats compare by value (`1` and `1.0` are equal), at any size.
    public func compareValue(_ other: JSONNumber) -> Int {
        // Read in place (a query's order compares numbers many times: no array per comparison).
        var (left, right) = (text, other.text)
        return left.withUTF8 { a in
            right.withUTF8 { b in
                let aNegative = a.first == UInt8(ascii: "-")
                let bNegative = b.first == UInt8(ascii: "-")
                if aNegative != bNegative { return aNegative ? -1 : 1 }
                let magnitude = Self.compareMagnitudes(
                    UnsafeBufferPointer(rebasing: a[(aNegative ? 1 : 0)...]),
                    UnsafeBufferPointer(rebasing: b[(bNegative ? 1 : 0)...])
                )
                return aNegative ? -magnitude : magnitude
            }
        }
    }

    /// Compares two unsigned canonical texts.
    private static func compareMagnitudes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let aPoint = a.firstIndex(of: UInt8(ascii: ".")) ?? a.count
        let bPoint = b.firstIndex(of: UInt8(ascii: ".")) ?? b.count
        if aPoint != bPoint { return aPoint < bPoint ? -1 : 1 }
        for index in 0..<aPoint where a[index] != b[index] { return a[index] < b[index] ? -1 : 1 }
        // The fractions, the shorter padded with zeros.
        let aFraction = UnsafeBufferPointer(rebasing: a[min(aPoint + 1, a.count)...])
        let bFraction = UnsafeBufferPointer(rebasing: b[min(bPoint + 1, b.count)...])
        for offset in 0..<max(aFraction.count, bFraction.count) {
            let x = offset < aFraction.count ? aFraction[offset] : UInt8(ascii: "0")
            let y = offset < bFraction.count ? bFraction[offset] : UInt8(ascii: "0")
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }
}

extension JSONNumber: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    public init(integerLiteral value: Int) { self.init(value) }
    public init(floatLiteral value: Double) {
        guard let number = JSONNumber(value) else { preconditionFailure("a JSON number must be finite") }
        self = number
    }
}
