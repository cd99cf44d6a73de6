// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON
import NIOCore
import Testing

@Suite struct NotificationFrameTests {
    @Test func prefixAndSharedBodyMakeOneJSONRPCNotification() throws {
        let body = ObjectChangedBody(
            snapshot: ObjectSnapshot(collection: "notes", id: "n1", version: 3, data: ["text": "hi"], updatedAt: "t"),
            dataStatus: .fresh,
            loadingStatus: .loaded
        )
        let shared = try NotificationFrame.body(body)
        for token: Int64 in [1, 42, 9_000_000_000] {
            var frame = NotificationFrame.prefix(method: NotificationMethod.objectChanged, token: token)
            var copy = shared
            frame.writeBuffer(&copy)
            let text = String(buffer: frame)
            #expect(text.hasSuffix("}\n"))
            #expect(text.filter { $0 == "\n" }.count == 1)
            let decoded = try JSONDecoder().decode(RPCIncomingMessage.self, from: Data(text.utf8))
            #expect(decoded.method == "object.changed")
            #expect(decoded.id == nil)
            let params = try JSONDecoder().decode(ObjectChangedParams.self, from: JSONEncoder().encode(decoded.params))
            #expect(params.token == token)
            #expect(params.snapshot?.version == 3)
            #expect(params.dataStatus == .fresh)
        }
    }

    @Test func sharedBodyIsNotCopiedPerToken() throws {
        let shared = try NotificationFrame.body(ObjectChangedBody(snapshot: nil, dataStatus: .notExist, loadingStatus: .loading))
        let copies = (0..<3).map { _ in shared }
        // ByteBuffer is copy-on-write: handing the body to many outboxes shares one storage.
        for copy in copies {
            copy.withUnsafeReadableBytes { a in
                shared.withUnsafeReadableBytes { b in #expect(a.baseAddress == b.baseAddress) }
            }
        }
    }

    /// `object.changed`'s body is written member by member (``NotificationFrame/body(_:)-(ObjectChangedBody)``):
    /// over seeded bodies (awkward strings and numbers, flags, no snapshot, an error) its bytes must be those
    /// `Encodable` writes through LiveJSON's encoder.
    @Test func objectChangedIsWrittenAsEncodableWritesIt() throws {
        var state: UInt64 = 20_261_126
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        func pick<T>(_ choices: [T]) -> T { choices[Int(next() % UInt64(choices.count))] }
        func string() -> String {
            (0..<Int(next() % 5)).map { _ in pick(["a", "Z", "é", "e\u{301}", "😀", "\"", "\\", "/", "\n", "\u{1}", "\u{7F}", "10", " "]) }.joined()
        }
        func value(_ depth: Int) -> JSONValue {
            switch next() % (depth > 2 ? 4 : 6) {
            case 0: .null
            case 1: .bool(next() % 2 == 0)
            // Integers past 2^53 and Int64, floats that look like integers: kept as their text.
            case 2:
                .number(
                    pick([
                        0, 7, -3, 2.5, 1.0, 1e21, 1e-7, JSONNumber(Int64(bitPattern: next())), JSONNumber(UInt64.max),
                        try! JSONNumber(validating: "9007199254740993"),
                    ])
                )
            case 3: .string(string())
            case 4: .array((0..<Int(next() % 3)).map { _ in value(depth + 1) })
            default: .object(JSONObject((0..<Int(next() % 4)).map { _ in (string(), value(depth + 1)) }))
            }
        }
        // Generic: `NotificationFrame.body` through `Encodable`, as for any other body.
        func encoded<Body: Encodable>(_ body: Body) throws -> ByteBuffer { try NotificationFrame.body(body) }
        var refused = 0
        for _ in 0..<2000 {
            let snapshot =
                next() % 5 == 0
                ? nil : ObjectSnapshot(collection: string(), id: string(), version: Int64(next() % 1_000_000), data: value(0), updatedAt: string())
            let body = ObjectChangedBody(
                snapshot: snapshot,
                dataStatus: pick([.notExist, .local, .fresh, .error]),
                loadingStatus: pick([.notLoading, .loading, .loaded, .error]),
                error: next() % 10 == 0 ? RPCError(code: .internalError, message: string()) : nil,
                resync: pick([nil, true, false]),
                pendingWrites: pick([nil, true, false]),
                unchanged: pick([nil, nil, nil, true, false])
            )
            let encodable = try? encoded(body)
            let written = try? NotificationFrame.body(body)
            #expect(written == encodable, "\(body)")
            if encodable == nil { refused += 1 }
        }
        #expect(refused == 0)  // every JSON value is written (a number is its text: none is not finite)
    }

    @Test func nullSnapshotIsExplicit() throws {
        let text = String(buffer: try NotificationFrame.body(ObjectChangedBody(snapshot: nil, dataStatus: .notExist, loadingStatus: .loading)))
        #expect(text.contains("\"snapshot\":null"))
    }

    @Test func errorResponsesCarryAnExplicitNullID() throws {
        let line = String(buffer: try WireJSON.line(RPCErrorResponse(id: nil, error: RPCError(code: .parseError, message: "bad"))))
        #expect(line == "{\"error\":{\"code\":-32700,\"message\":\"bad\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n")
    }
}

@Suite struct JSONValueTests {
    @Test(arguments: [
        "null", "true", "false", "0", "-3", "2.5", "\"s\"", "[1,\"a\",null]", "{\"a\":{\"b\":[true]}}",
    ])
    func roundTripsThroughCodable(_ text: String) throws {
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(String(decoding: try encoder.encode(value), as: UTF8.self) == text)
    }

    @Test func numbersAreNotBooleans() throws {
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data("1".utf8)) == .number(1))
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data("true".utf8)) == .bool(true))
    }
}
