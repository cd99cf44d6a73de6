// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import SeededRandom

/// JSON for tests of the encoders and parsers: Foundation's and LiveJSON's sorted encodings of a value, and a
/// deterministic generator of awkward JSON values.
public enum JSONSamples {
    public static func foundation(_ value: some Encodable, escapingSlashes: Bool = false) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapingSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public static func sorted(_ value: some Encodable, escapingSlashes: Bool = false) throws -> String {
        String(decoding: try SortedJSONEncoder(escapesSlashes: escapingSlashes).encode(value), as: UTF8.self)
    }

    /// A deterministic generator of JSON values with the awkward parts: control characters, quotes,
    /// slashes, non-ASCII, integers beyond 2^53, fractions, tiny and huge magnitudes, negative zero, keys
    /// that sort differently by case, digits and accents.
    public struct Values {
        public var random: SeededGenerator

        public init(seed: UInt64) { random = SeededGenerator(seed: seed) }

        public mutating func next() -> UInt64 { random.next() }

        public mutating func pick<T>(_ choices: [T]) -> T { choices[Int(next() % UInt64(choices.count))] }

        public mutating func string() -> String {
            let pieces = [
                "a", "B", "z", "_", "é", "e\u{301}", "中", "😀", "\"", "\\", "/", "\n", "\t", "\r", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}",
                "\u{2028}", "10", "9", " ", "ｆ", "\u{E000}",
            ]
            return (0..<Int(next() % 6)).map { _ in pick(pieces) }.joined()
        }

        public mutating func number() -> Double {
            switch next() % 8 {
            case 0: Double(Int64(bitPattern: next()) % 1_000_000)
            case 1: Double(Int64(bitPattern: next()))  // mostly beyond 2^53
            case 2: Double(next() % 10_000) / 100
            case 3: Double(bitPattern: next() & 0x7FEF_FFFF_FFFF_FFFF)  // any finite magnitude
            // The extremes: 5e-324 and 1.7976931348623157e308.
            case 4: pick([0.1, 1e-7, 1e21, 1e16, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 123.456, 2.5e-8])
            case 5: -0.0
            case 6: Double(next() % 1000) * 1e15
            default: -Double(next() % 1_000_000) / 7
            }
        }

        public mutating func value(depth: Int = 0) -> JSONValue {
            switch next() % (depth > 3 ? 4 : 6) {
            case 0: .null
            case 1: .bool(next() % 2 == 0)
            case 2: .number(JSONNumber(number())!)
            case 3: .string(string())
            case 4: .array((0..<Int(next() % 4)).map { _ in value(depth: depth + 1) })
            default:
                .object(JSONObject((0..<Int(next() % 5)).map { _ in (string(), value(depth: depth + 1)) }))
            }
        }
    }

}
