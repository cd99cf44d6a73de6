// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import Testing

@testable import LiveGateProtocol

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
        #expect(throws: EncodingError.self) { try WireJSON.line(JSONValue.number(-.infinity)) }
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
}
