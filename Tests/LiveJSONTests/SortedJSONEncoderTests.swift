// Licensed under the Apache License, Version 2.0.

import Foundation
import JSONTestSupport
import LiveJSON
import SeededRandom
import Testing

@Suite struct SortedJSONEncoderTests {
    /// A `JSONValue` is written exactly (its numbers' text, its names by code point), which `JSONEncoder` cannot
    /// do: the text parses back to the same value, and the encoder writes what ``JSONWriter`` writes.
    @Test func writesAnyJSONValueExactly() throws {
        var values = JSONSamples.Values(seed: 2026)
        for _ in 0..<3_000 {
            let value = values.value()
            var writer = JSONWriter()
            try writer.write(value)
            let written = String(decoding: writer.bytes, as: UTF8.self)
            #expect(try JSONSamples.sorted(value) == written)
            #expect(try JSONValue(parsing: written) == value, "\(written)")
            #expect(try JSONValue(parsing: JSONSamples.sorted(value, escapingSlashes: true)) == value)
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
        #expect(try JSONSamples.sorted(Everything()) == JSONSamples.foundation(Everything()))
        #expect(try JSONSamples.sorted(Everything(), escapingSlashes: true) == JSONSamples.foundation(Everything(), escapingSlashes: true))
        #expect(try JSONSamples.sorted([Everything(), Everything(optional: 3)]) == JSONSamples.foundation([Everything(), Everything(optional: 3)]))
        #expect(try JSONSamples.sorted("top/level") == JSONSamples.foundation("top/level"))
        #expect(try JSONSamples.sorted(42) == JSONSamples.foundation(42))
        #expect(try JSONSamples.sorted(Optional<Int>.none) == JSONSamples.foundation(Optional<Int>.none))
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
