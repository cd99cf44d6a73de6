// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateProtocol
import LiveJSON
import NIOCore
import Testing

/// What `transcripts/jsonrpc.transcript` cannot carry, against the real daemon: bytes that are not UTF-8,
/// a batch over the limit, and a batch's members each counted by the request rate limit.
@Suite(.serialized) struct JSONRPCConformanceTests {
    @Test func invalidUTF8IsAParseErrorAndTheConnectionGoesOn() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            var frame = ByteBuffer(string: #"{"jsonrpc":"2.0","id":1,"method":"object.update","params":{"collection":"notes","id":"x","data":{"s":""#)
            frame.writeBytes([0xC3, 0x28])  // a two-byte sequence whose second byte is no continuation
            frame.writeString("\"}}}\n")
            try await raw.sendBytes(frame)
            let answer = try JSONValue(parsing: try await raw.next())
            #expect(answer["error"]?["code"] == -32700 && answer["id"] == .null, "\(answer)")
            #expect(answer["error"]?["message"]?.stringValue?.contains("invalid UTF-8") == true, "\(answer)")
            try await raw.send(#"{"jsonrpc":"2.0","id":2,"method":"session.state"}"#)
            #expect(try JSONValue(parsing: try await raw.next())["id"] == 2, "the connection stays usable")
        }
    }

    @Test func aBatchOverTheLimitIsOneErrorAndNoneOfItIsPerformed() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            let member = #"{"jsonrpc":"2.0","id":1,"method":"object.create","params":{"collection":"notes","id":"over","data":{}}}"#
            try await raw.send("[" + Array(repeating: member, count: RequestLimits.maxBatchRequests + 1).joined(separator: ",") + "]")
            let answer = try JSONValue(parsing: try await raw.next())
            #expect(answer["error"]?["code"] == -32003 && answer["error"]?["data"]?["limit"] == "maxBatchRequests", "\(answer)")
            // A batch at the limit is performed: one create succeeds, the others conflict with it.
            try await raw.send("[" + Array(repeating: member, count: RequestLimits.maxBatchRequests).joined(separator: ",") + "]")
            guard case .array(let answers) = try JSONValue(parsing: try await raw.next()) else {
                Issue.record("a batch's answer is an array")
                return
            }
            #expect(answers.count == RequestLimits.maxBatchRequests)
            #expect(answers.filter { $0["result"] != nil }.count == 1 && answers.filter { $0["error"]?["code"] == -32005 }.count == 99)
        }
        #expect(try await cluster.get("notes", "over").version == 1, "the batch over the limit created nothing")
    }

    @Test func eachMemberOfABatchCountsAgainstTheRequestRate() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let config = cluster.directory + "/livegated.conf"
        try "max-requests-per-second = 5\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await cluster.startDaemon(extraArguments: ["--config", config])
        try await RawConnection.with(cluster.socketPath) { raw in
            let member = #"{"jsonrpc":"2.0","id":1,"method":"session.state"}"#
            try await raw.send("[" + Array(repeating: member, count: 8).joined(separator: ",") + "]")
            guard case .array(let answers) = try JSONValue(parsing: try await raw.next()) else {
                Issue.record("a batch's answer is an array")
                return
            }
            let limited = answers.filter { $0["error"]?["data"]?["limit"] == "maxRequestsPerSecond" }.count
            #expect(answers.count == 8 && limited >= 3, "a burst of 5, then the rate: \(answers)")
        }
    }
}
