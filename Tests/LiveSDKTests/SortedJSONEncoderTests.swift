// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import SeededRandom
import Testing

@Suite struct SortedJSONEncoderTests {
    static func foundation(_ value: some Encodable, escapingSlashes: Bool = false) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapingSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func sorted(_ value: some Encodable, escapingSlashes: Bool = false) throws -> String {
        String(decoding: try SortedJSONEncoder(escapesSlashes: escapingSlashes).encode(value), as: UTF8.self)
    }

    /// A deterministic generator of JSON values with the awkward parts: control characters, quotes,
    /// slashes, non-ASCII, integers beyond 2^53, fractions, tiny and huge magnitudes, negative zero, keys
    /// that sort differently by case, digits and accents.
    struct Values {
        var random: SeededGenerator

        init(seed: UInt64) { random = SeededGenerator(seed: seed) }

        mutating func next() -> UInt64 { random.next() }

        mutating func pick<T>(_ choices: [T]) -> T { choices[Int(next() % UInt64(choices.count))] }

        mutating func string() -> String {
            let pieces = [
                "a", "B", "z", "_", "é", "e\u{301}", "中", "😀", "\"", "\\", "/", "\n", "\t", "\r", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}",
                "\u{2028}", "10", "9", " ", "ｆ", "\u{E000}",
            ]
            return (0..<Int(next() % 6)).map { _ in pick(pieces) }.joined()
        }

        mutating func number() -> Double {
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

        mutating func value(depth: Int = 0) -> JSONValue {
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

    /// A `JSONValue` is written exactly (its numbers' text, its names by code point), which `JSONEncoder` cannot
    /// do: the text parses back to the same value, and the encoder writes what ``JSONWriter`` writes.
    @Test func writesAnyJSONValueExactly() throws {
        var values = Values(seed: 2026)
        for _ in 0..<3_000 {
            let value = values.value()
            var writer = JSONWriter()
            try writer.write(value)
            let written = String(decoding: writer.bytes, as: UTF8.self)
            #expect(try Self.sorted(value) == written)
            #expect(try JSONValue(parsing: written) == value, "\(written)")
            #expect(try JSONValue(parsing: Self.sorted(value, escapingSlashes: true)) == value)
        }
    }

    enum Kind: String, Codable { case first, second }

    struct Inner: Codable, Equatable {
        var name: String
        var count: UInt64
        var ratio: Double
    }

    /// Every kind of container and scalar a `Codable` type can use, hand-written where synthesis would not.
    struct Everything: Encodable {
        var optional: Int? = nil
        var present: Int8? = -8
        var kind = Kind.second
        var inner = Inner(name: "x/y", count: .max, ratio: 100)
        var list: [Inner] = [Inner(name: "a", count: 1, ratio: 0.5), Inner(name: "\u{1}", count: 0, ratio: -1e-9)]
        var byNumber: [Int: String] = [2: "two", 10: "ten"]
        var byName: [String: [Bool]] = ["b": [true], "A": [], "a": [false, true]]
        var json: JSONValue = .object(["z": .number(1), "y": .array([.null, .string("s")])])
        var date = Date(timeIntervalSinceReferenceDate: 12.5)
        var integers: [Int64] = [.min, .max, 0]
        var small: [UInt16] = [1, 65535]

        enum CodingKeys: String, CodingKey {
            case optional, present, kind, inner, list, byNumber, byName, json, date, integers, small, nested, parent
        }
        enum NestedKeys: String, CodingKey { case deep, items }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(optional, forKey: .optional)
            try container.encodeIfPresent(present, forKey: .present)
            try container.encode(kind, forKey: .kind)
            try container.encode(inner, forKey: .inner)
            try container.encode(list, forKey: .list)
            try container.encode(byNumber, forKey: .byNumber)
            try container.encode(byName, forKey: .byName)
            try container.encode(json, forKey: .json)
            try container.encode(date, forKey: .date)
            try container.encode(integers, forKey: .integers)
            try container.encode(small, forKey: .small)
            var nested = container.nestedContainer(keyedBy: NestedKeys.self, forKey: .nested)
            try nested.encodeNil(forKey: .deep)
            var items = nested.nestedUnkeyedContainer(forKey: .items)
            try items.encode("one")
            try items.encodeNil()
            var inItems = items.nestedContainer(keyedBy: NestedKeys.self)
            try inItems.encode(3.25, forKey: .deep)
            try inner.encode(to: container.superEncoder(forKey: .parent))
            try inner.encode(to: container.superEncoder())
        }
    }

    @Test func writesWhatJSONEncoderWritesForEveryKindOfContainer() throws {
        #expect(try Self.sorted(Everything()) == Self.foundation(Everything()))
        #expect(try Self.sorted(Everything(), escapingSlashes: true) == Self.foundation(Everything(), escapingSlashes: true))
        #expect(try Self.sorted([Everything(), Everything(optional: 3)]) == Self.foundation([Everything(), Everything(optional: 3)]))
        #expect(try Self.sorted("top/level") == Self.foundation("top/level"))
        #expect(try Self.sorted(42) == Self.foundation(42))
        #expect(try Self.sorted(Optional<Int>.none) == Self.foundation(Optional<Int>.none))
    }

    struct WithData: Encodable {
        var data = Data([1, 2, 3])
    }

    @Test func refusesWhatItWasToldToAndFloatAndWhatIsNotFinite() {
        #expect(throws: SortedJSONEncoder.Unsupported.self) { try SortedJSONEncoder(refusing: [Data.self]).encode(WithData()) }
        #expect(throws: SortedJSONEncoder.Unsupported.self) { try SortedJSONEncoder().encode([Float(1.5)]) }
        #expect(throws: SortedJSONEncoder.Unsupported.self) { try SortedJSONEncoder().encode(["f": Float(1.5)]) }
        #expect(throws: JSONWriter.NonFiniteNumber.self) { try SortedJSONEncoder().encode([Double.nan]) }
    }
}
