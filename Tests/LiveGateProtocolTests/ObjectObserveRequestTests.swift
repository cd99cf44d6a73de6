// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON
import SeededRandom
import Testing

/// `ObjectObserveRequest(frame:)` (the daemon's reading of a frame in place) against the general way the daemon
/// reads a frame: parsed into a ``JSONValue``, read as an ``RPCRequestEnvelope``, its params read or decoded.
@Suite struct ObjectObserveRequestTests {
    /// What the general way makes of `text` when it is an `object.observe` request it can perform.
    private static func general(_ text: String) -> ObjectObserveRequest? {
        guard let value = try? JSONValue(parsing: text), case .success(let envelope) = RPCRequestEnvelope.read(value),
            envelope.method == Method.objectObserve, let id = envelope.id
        else { return nil }
        guard
            let params = ObjectObserveParams(reading: envelope.params)
                ?? (try? JSONValueDecoder.decode(ObjectObserveParams.self, from: envelope.params ?? .null))
        else { return nil }
        return ObjectObserveRequest(id: id, params: params)
    }

    private static func fast(_ text: String) -> ObjectObserveRequest? {
        var text = text
        return text.withUTF8 { ObjectObserveRequest(frame: UnsafeRawBufferPointer($0)) }
    }

    private static func space(_ random: inout SeededGenerator) -> String {
        Int.random(in: 0..<4, using: &random) == 0 ? [" ", "\n", "\t ", "  "].randomElement(using: &random)! : ""
    }

    /// A member's name as written: now and then escaped (the same name to the general parser, not to the reader).
    private static func name(_ name: String, _ random: inout SeededGenerator) -> String {
        guard Int.random(in: 0..<30, using: &random) == 0, let first = name.unicodeScalars.first else { return "\"\(name)\"" }
        return "\"\\u00\(String(first.value, radix: 16))\(name.dropFirst())\""
    }

    /// A value's text, with whitespace here and there and strings now and then escaped.
    private static func text(_ value: JSONValue, _ random: inout SeededGenerator) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number): return number.text
        case .string(let string):
            if Int.random(in: 0..<10, using: &random) == 0, let first = string.unicodeScalars.first, first.isASCII {
                return "\"\\u00\(String(first.value, radix: 16))\(string.dropFirst())\""
            }
            return "\"\(string)\""
        case .array(let items):
            return "[" + items.map { space(&random) + text($0, &random) + space(&random) }.joined(separator: ",") + "]"
        case .object(let members):
            return "{"
                + members.sorted { $0.key < $1.key }.map {
                    space(&random) + "\"\($0.key)\"" + space(&random) + ":" + space(&random) + text($0.value, &random)
                }
                .joined(separator: ",") + space(&random) + "}"
        }
    }

    /// An object's text from `members` in a random order, some given twice.
    private static func object(_ members: [(String, String)], _ random: inout SeededGenerator) -> String {
        var written = members.shuffled(using: &random)
        if Int.random(in: 0..<25, using: &random) == 0, let twice = written.randomElement(using: &random) { written.append(twice) }
        return "{" + space(&random)
            + written.map { name($0.0, &random) + space(&random) + ":" + space(&random) + $0.1 + space(&random) }.joined(separator: ",")
            + "}"
    }

    private static func randomFrame(_ random: inout SeededGenerator) -> String {
        var params: [(String, String)] = []
        for member in ["collection", "id", "once", "policy", "sinceVersion", "fields", "extra"]
        where Int.random(in: 0..<10, using: &random) < (member == "collection" || member == "id" ? 9 : 2) {
            params.append((member, text(ObjectObserveParamsReadingTests.member(member, &random), &random)))
        }
        let ids: [String] = [
            String(Int.random(in: -1_000...1_000_000, using: &random)), "\"r-\(Int.random(in: 0...99, using: &random))\"", "null",
            "1.5", "1e3", "-0", "9223372036854775807", "9223372036854775808", "true", "{}", "[1]", "\"\\u0041\"",
        ]
        var envelope: [(String, String)] = []
        if Int.random(in: 0..<20, using: &random) > 0 {
            envelope.append(("jsonrpc", ["\"2.0\"", "\"2.0\"", "\"2.0\"", "\"1.0\"", "2"].randomElement(using: &random)!))
        }
        if Int.random(in: 0..<20, using: &random) > 0 {
            envelope.append(("id", Int.random(in: 0..<3, using: &random) == 0 ? ids.randomElement(using: &random)! : ids[0]))
        }
        if Int.random(in: 0..<20, using: &random) > 0 {
            let methods = ["\"object.observe\"", "\"object.observe\"", "\"object.observe\"", "\"object.update\"", "\"object.observ\\u0065\""]
            envelope.append(("method", methods.randomElement(using: &random)!))
        }
        if Int.random(in: 0..<20, using: &random) > 0 {
            let other = ["[]", "null", "\"x\"", "{}"].randomElement(using: &random)!
            envelope.append(("params", Int.random(in: 0..<20, using: &random) == 0 ? other : object(params, &random)))
        }
        if Int.random(in: 0..<20, using: &random) == 0 { envelope.append(("extra", "1")) }
        var frame = space(&random) + object(envelope, &random) + space(&random)
        switch Int.random(in: 0..<40, using: &random) {
        case 0: frame = "[" + frame + "]"
        case 1: frame += "x"
        case 2: frame = String(frame.dropLast())
        default: break
        }
        return frame
    }

    @Test func readsWhatTheGeneralWayReadsOrDeclines() {
        var random = SeededGenerator(seed: 0x0B5E_12E5_F2A3)
        var read = 0
        var general = 0
        for _ in 0..<20_000 {
            let frame = Self.randomFrame(&random)
            let expected = Self.general(frame)
            if expected != nil { general += 1 }
            if let fast = Self.fast(frame) {
                read += 1
                #expect(fast == expected, "\(frame)")
            }
        }
        // The common shapes do take this way: most of what the general way performs.
        #expect(read > 1_000 && read > general / 3, "\(read) of \(general)")
    }

    @Test func readsTheUsualRequest() {
        #expect(
            Self.fast(#"{"jsonrpc":"2.0","id":7,"method":"object.observe","params":{"collection":"many","id":"i7"}}"#)
                == ObjectObserveRequest(id: .number(7), params: ObjectObserveParams(collection: "many", id: "i7"))
        )
        #expect(
            Self.fast(
                #" { "method" : "object.observe", "params": {"sinceVersion": 12, "id": "a", "policy": "freshOnly", "once": false, "collection": "c"}, "id": "x", "jsonrpc": "2.0" } "#
            )
                == ObjectObserveRequest(
                    id: .string("x"),
                    params: ObjectObserveParams(collection: "c", id: "a", once: false, policy: .freshOnly, sinceVersion: 12)
                )
        )
        // Left to the general way: fields, another method, a batch, a notification, an unknown member.
        #expect(Self.fast(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"c","id":"a","fields":["t"]}}"#) == nil)
        #expect(Self.fast(#"{"jsonrpc":"2.0","id":1,"method":"object.update","params":{"collection":"c","id":"a"}}"#) == nil)
        #expect(Self.fast(#"[{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"c","id":"a"}}]"#) == nil)
        #expect(Self.fast(#"{"jsonrpc":"2.0","method":"object.observe","params":{"collection":"c","id":"a"}}"#) == nil)
        #expect(Self.fast(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"c","id":"a","x":1}}"#) == nil)
    }
}
