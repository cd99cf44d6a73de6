// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON
import SeededRandom
import Testing

@Suite struct WireJSONTests {
    struct Special: Encodable {
        var data = Data([0, 1, 2, 250])
        var url = URL(string: "https://example.com/a b")
        var decimal = Decimal(string: "12.345")!
        var float: Float = 1.1
        var text = "a/b"
    }

    @Test func whatTheFastEncoderRefusesIsEncodedByJSONEncoder() throws {
        #expect(try WireJSON.bytes(Special()) == [UInt8](WireJSON.foundationEncoded(Special())))
    }

    @Test func aNumberThatIsNotFiniteIsRefusedAsJSONEncoderRefusesIt() {
        #expect(throws: EncodingError.self) { try WireJSON.bytes(["n": Double.nan]) }
    }

    @Test func notificationsAreWhatJSONEncoderWrites() throws {
        let snapshot = ObjectSnapshot(
            collection: "notes",
            id: "n/1",
            version: 9_007_199_254_740_993,
            data: .object(["text": .string("héllo\n"), "n": .number(0.1)]),
            updatedAt: "2026-11-23T00:00:00Z"
        )
        let bodies = [
            ObjectChangedBody(snapshot: snapshot, dataStatus: .fresh, loadingStatus: .loaded),
            ObjectChangedBody(snapshot: nil, dataStatus: .notExist, loadingStatus: .loading, resync: true, pendingWrites: true),
            ObjectChangedBody(
                snapshot: snapshot,
                dataStatus: .error,
                loadingStatus: .error,
                error: RPCError(code: .cloudUnavailable, message: "the cloud is unreachable")
            ),
        ]
        for body in bodies {
            #expect(try WireJSON.bytes(body) == [UInt8](WireJSON.foundationEncoded(body)))
        }
    }

    /// Through the encoder, whatever the type (a generic context sees no ``WireWritable``).
    static func encoded<Value: Encodable>(_ value: Value) throws -> [UInt8] { try WireJSON.bytes(value) }

    /// The answers that write themselves (``WireWritable``) against the encoder, over ids of every kind and
    /// random tokens; a seeded generator, so that a failure replays.
    @Test func answersThatWriteThemselvesAreWhatTheEncoderWrites() throws {
        var random = SeededGenerator(seed: 0x5EED_70CE)
        let strings = ["", "a", "a/b", "quote\"", "back\\slash", "tab\tnew\nline\u{1}", "héllo", "\u{1F600}", "e\u{301}"]
        var ids: [RequestID] = [
            .null, .number(0), .number(-1), .number(.max), .number(.min), .exact(0.5), .exact(-1e-7), .exact(1.0),
            .exact(try JSONNumber(validating: "10000000000000000999")),
        ]
        ids += strings.map(RequestID.string)
        for _ in 0..<200 {
            ids.append(.number(Int64.random(in: .min ... .max, using: &random)))
            ids.append(.exact(JSONNumber(Double.random(in: -1e20...1e20, using: &random))!))
            let length = Int.random(in: 0...12, using: &random)
            ids.append(.string(String((0..<length).map { _ in Character(UnicodeScalar(UInt8.random(in: 0...127, using: &random))) })))
        }
        for id in ids {
            let token = Int64.random(in: .min ... .max, using: &random)
            let response = RPCResponse(id: id, result: TokenResult(token: token))
            let written = try WireJSON.bytes(response)
            let encoded = try Self.encoded(response)
            #expect(written == encoded, "id \(id), token \(token)")
            // Foundation's encoder too, where it can write the id (not a number kept as its text).
            if case .exact = id { continue }
            #expect(written == [UInt8](try WireJSON.foundationEncoded(response)), "id \(id), token \(token)")
        }
    }
}
