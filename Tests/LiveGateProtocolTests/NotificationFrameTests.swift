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
