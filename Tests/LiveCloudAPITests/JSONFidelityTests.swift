// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import SeededRandom
import Testing

/// Values kept exactly: numbers as their decimal text, object members named by code points (Protocol/ipc,
/// "Values").
@Suite struct JSONFidelityTests {
    /// Written → read back (parsed, then written by LiveJSON's writer).
    static let roundTrips: [(String, String)] = [
        ("9007199254740993", "9007199254740993"),
        ("9223372036854775807", "9223372036854775807"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("10000000000000000999", "10000000000000000999"),
        ("-123123123123123123123123123123", "-123123123123123123123123123123"),
        ("1.0", "1.0"),
        ("1.50", "1.50"),
        ("1E6", "1000000.0"),
        ("1e+6", "1000000.0"),
        ("2.50E1", "25.0"),
        ("1.5e-3", "0.0015"),
        ("12.5E-1", "1.25"),
        ("0E5", "0.0"),
        ("0.5E1", "5.0"),
        ("-0", "0"),
        ("-0.0", "0.0"),
        ("-0E3", "0.0"),
        ("-1E-2", "-0.01"),
        ("123e-20", "0.00000000000000000123"),
        (#"{"a":1,"a":2}"#, #"{"a":2}"#),
        ("{\"\u{E9}\":1,\"e\u{301}\":2}", "{\"e\u{301}\":2,\"\u{E9}\":1}"),
        ("{\"\u{C5}\":1,\"A\u{30A}\":2,\"\u{212B}\":3}", "{\"A\u{30A}\":2,\"\u{C5}\":1,\"\u{212B}\":3}"),
        (#"{"b":[1.0,{"d":-0,"c":1e2}],"a":null}"#, #"{"a":null,"b":[1.0,{"c":100.0,"d":0}]}"#),
    ]

    @Test(arguments: roundTrips) func readsBackExactly(_ written: String, _ expected: String) throws {
        let value = try JSONValue(parsing: written)
        var writer = JSONWriter()
        try writer.write(value)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
        // The canonical form reads back as itself.
        #expect(try JSONValue(parsing: expected) == value)
        // Through the encoder the protocol and the stores use.
        #expect(String(decoding: try SortedJSONEncoder().encode(value), as: UTF8.self) == expected)
    }

    @Test func namesThatSwiftTakesAsEqualAreDistinctMembers() throws {
        let value = try JSONValue(parsing: "{\"\u{C5}\":1,\"A\u{30A}\":2,\"\u{212B}\":3}")
        guard case .object(let members) = value else { Issue.record("not an object"); return }
        #expect(members.count == 3)
        #expect(members["\u{C5}"] == 1)
        #expect(members["A\u{30A}"] == 2)
        #expect(members["\u{212B}"] == 3)
        var changed = members
        changed["A\u{30A}"] = nil
        #expect(changed.count == 2 && changed["\u{C5}"] == 1 && changed["\u{212B}"] == 3)
        // Equal and hashed by bytes.
        #expect(JSONObject([("\u{E9}", 1)]) != JSONObject([("e\u{301}", 1)]))
        #expect(Set([JSONObject([("\u{E9}", 1)]), JSONObject([("e\u{301}", 1)])]).count == 2)
    }

    @Test func aMergePatchKeepsWhatItDoesNotTouch() throws {
        let target = try JSONValue(parsing: #"{"big":9007199254740993,"f":1.0,"n":{"x":1E2,"y":2}}"#)
        let patch = try JSONValue(parsing: #"{"n":{"y":null,"z":10000000000000000999}}"#)
        var writer = JSONWriter()
        try writer.write(target.merging(patch: patch))
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"{"big":9007199254740993,"f":1.0,"n":{"x":100.0,"z":10000000000000000999}}"#)
    }

    @Test func integersDecodeExactlyWithinTheirType() throws {
        struct Row: Decodable { var id: Int64; var u: UInt64 }
        let row = try JSONValue.parse(#"{"id":9223372036854775807,"u":18446744073709551615}"#, as: Row.self)
        #expect(row.id == .max && row.u == .max)
        #expect(throws: (any Error).self) { try JSONValue.parse(#"{"id":9223372036854775808,"u":0}"#, as: Row.self) }
        #expect(throws: (any Error).self) { try JSONValue.parse(#"{"id":1.5,"u":0}"#, as: Row.self) }
        #expect(try JSONValue.parse(#"{"id":3.0,"u":0}"#, as: Row.self).id == 3)
    }

    @Test func numbersTooLongWrittenOutAreRefusedAsALimit() {
        for text in ["1E1200", "1e-1200", String(repeating: "7", count: 1_200)] {
            do {
                _ = try JSONValue(parsing: text)
                Issue.record("\(text.prefix(12)) accepted")
            } catch {
                #expect(error.isNumberLimit)
            }
        }
        // Every finite Double written out fits.
        for double in [Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, Double.leastNonzeroMagnitude] {
            #expect(JSONNumber(double) != nil)
        }
    }

    /// `compareValue` against a model written apart: rationals as (numerator, power of ten) compared by scaling.
    @Test(arguments: [1, 2, 3, 4]) func valuesCompareExactly(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        func draw() -> (text: String, digits: [UInt8], scale: Int, negative: Bool) {
            let negative = Bool.random(using: &random)
            let integerDigits = Int.random(in: 1...22, using: &random)
            var digits = (0..<integerDigits).map { _ in UInt8.random(in: 0...9, using: &random) }
            if digits.count > 1 && digits[0] == 0 { digits[0] = 1 }
            let fraction =
                Bool.random(using: &random) ? (0..<Int.random(in: 1...6, using: &random)).map { _ in UInt8.random(in: 0...9, using: &random) } : []
            var text = (negative ? "-" : "") + digits.map(String.init).joined()
            if !fraction.isEmpty { text += "." + fraction.map(String.init).joined() }
            return (text, digits + fraction, fraction.count, negative)
        }
        /// The model: both values scaled to 6 fraction digits as digit strings, compared as signed big numbers.
        func model(_ a: (text: String, digits: [UInt8], scale: Int, negative: Bool), _ b: (text: String, digits: [UInt8], scale: Int, negative: Bool))
            -> Int
        {
            func scaled(_ x: (text: String, digits: [UInt8], scale: Int, negative: Bool)) -> (Bool, [UInt8]) {
                var digits = x.digits + Array(repeating: 0, count: 6 - x.scale)
                while digits.count > 1 && digits[0] == 0 { digits.removeFirst() }
                let zero = digits == [0]
                return (x.negative && !zero, digits)
            }
            let (an, ad) = scaled(a)
            let (bn, bd) = scaled(b)
            if an != bn { return an ? -1 : 1 }
            let magnitude = ad.count != bd.count ? (ad.count < bd.count ? -1 : 1) : (ad == bd ? 0 : (ad.lexicographicallyPrecedes(bd) ? -1 : 1))
            return an ? -magnitude : magnitude
        }
        for _ in 0..<2_000 {
            let a = draw()
            let b = Bool.random(using: &random) ? a : draw()
            let x = try JSONNumber(validating: a.text)
            let y = try JSONNumber(validating: b.text)
            #expect(x.compareValue(y) == model(a, b), "\(a.text) vs \(b.text)")
        }
        #expect((try JSONNumber(validating: "9007199254740993")).compareValue(try JSONNumber(validating: "9007199254740992")) == 1)
        #expect((1 as JSONNumber).compareValue(try JSONNumber(validating: "1.0")) == 0)
        #expect((1 as JSONNumber) != (try JSONNumber(validating: "1.0")))
    }

    /// Strings in a filter and an order compare by code units, as both stores do: "é" (U+00E9) and "é" (e + U+0301)
    /// are different values (Swift's == calls them equal).
    @Test func queriesMatchAndOrderStringsByCodeUnits() throws {
        func entity(_ id: String, _ text: String) -> Entity {
            Entity(collection: "c", id: id, version: 1, data: ["s": .string(text)], createdAt: "", updatedAt: "", deleted: false)
        }
        let (composed, decomposed) = ("caf\u{E9}", "cafe\u{301}")
        #expect(composed == decomposed, "Swift's String equality, which the query must not use")
        let query = CollectionQuery(collection: "c", where: ["s": .string(composed)])
        #expect(query.matches(entity("a", composed)))
        #expect(!query.matches(entity("b", decomposed)))
        let sorted = CollectionQuery(collection: "c", sort: QuerySort(field: "s"))
        // By bytes: "cafe\u{301}" (63 61 66 65 cc 81) before "caf\u{E9}" (63 61 66 c3 a9), whatever the ids.
        #expect(sorted.areInIncreasingOrder(sorted.position(of: entity("z", decomposed)), sorted.position(of: entity("a", composed))))
        #expect(!sorted.areInIncreasingOrder(sorted.position(of: entity("a", composed)), sorted.position(of: entity("z", decomposed))))
    }

    @Test func queriesMatchAndOrderNumbersExactly() throws {
        func entity(_ id: String, _ n: String) throws -> Entity {
            Entity(collection: "c", id: id, version: 1, data: try JSONValue(parsing: #"{"n":\#(n)}"#), createdAt: "", updatedAt: "", deleted: false)
        }
        let query = CollectionQuery(collection: "c", where: ["n": try JSONValue(parsing: "9007199254740993")], sort: QuerySort(field: "n"))
        #expect(query.matches(try entity("a", "9007199254740993")))
        #expect(!query.matches(try entity("b", "9007199254740992")))
        #expect(CollectionQuery(collection: "c", where: ["n": 1]).matches(try entity("c", "1.0")))
        let sorted = CollectionQuery(collection: "c", sort: QuerySort(field: "n"))
        let big = sorted.position(of: try entity("a", "9007199254740993"))
        let smaller = sorted.position(of: try entity("z", "9007199254740992"))
        #expect(sorted.areInIncreasingOrder(smaller, big))
        #expect(!sorted.areInIncreasingOrder(big, smaller))
    }
}
