// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON
import SeededRandom
import Testing

/// `ObjectObserveParams(reading:)` (the daemon's fast path) against the `Decodable` conformance, which decides
/// whenever the fast path declines.
@Suite struct ObjectObserveParamsReadingTests {
    /// A value for one member: mostly of the right type, sometimes not, sometimes `null` or out of range.
    static func member(_ name: String, _ random: inout SeededGenerator) -> JSONValue {
        let strings: [JSONValue] = [.string(""), .string("notes"), .string("n/1"), .string("héllo"), .string("freshOnly"), .string("localThenFresh")]
        let others: [JSONValue] = [
            .null, .bool(true), .bool(false), .number(0), .number(-3), .number(1.5), .number(9_007_199_254_740_992),
            .number(9_007_199_254_740_994), .number(1e300), .array([]), .array([.string("a"), .string("b")]),
            .array([.string("a"), .number(1)]), .object([:]),
        ]
        let typed: [JSONValue]
        switch name {
        case "once": typed = [.bool(true), .bool(false)]
        case "policy": typed = [.string("freshOnly"), .string("localThenFresh"), .string("fresh")]
        case "sinceVersion": typed = [.integer(Int.random(in: -5...1_000_000, using: &random))]
        case "fields": typed = [.array((0..<Int.random(in: 0...3, using: &random)).map { .string("f\($0)") })]
        default: typed = strings
        }
        return Int.random(in: 0..<4, using: &random) == 0
            ? (others + strings).randomElement(using: &random)! : typed.randomElement(using: &random)!
    }

    @Test func readsWhatTheDecoderReadsOrDeclines() throws {
        var random = SeededGenerator(seed: 0x0B5E_12E5)
        let names = ["collection", "id", "once", "policy", "sinceVersion", "fields", "extra"]
        var read = 0
        for _ in 0..<5_000 {
            var members: [String: JSONValue] = [:]
            for name in names where Int.random(in: 0..<10, using: &random) < (name == "collection" || name == "id" ? 9 : 4) {
                members[name] = Self.member(name, &random)
            }
            let params: JSONValue = Int.random(in: 0..<50, using: &random) == 0 ? .array([]) : .object(JSONObject(members))
            let decoded = try? JSONValueDecoder.decode(ObjectObserveParams.self, from: params)
            if let fast = ObjectObserveParams(reading: params) {
                read += 1
                #expect(fast == decoded, "\(params)")
            }
        }
        // The common shapes do take the fast path.
        #expect(read > 1_000)
        let plain: JSONValue = .object(["collection": .string("notes"), "id": .string("n1")])
        #expect(ObjectObserveParams(reading: plain) == ObjectObserveParams(collection: "notes", id: "n1"))
        let full: JSONValue = .object([
            "collection": .string("notes"), "id": .string("n1"), "once": .bool(true), "policy": .string("freshOnly"),
            "sinceVersion": .number(7), "fields": .array([.string("title")]),
        ])
        #expect(
            ObjectObserveParams(reading: full)
                == ObjectObserveParams(collection: "notes", id: "n1", once: true, policy: .freshOnly, sinceVersion: 7, fields: ["title"])
        )
        #expect(ObjectObserveParams(reading: nil) == nil)
    }
}
