// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import Testing

/// Reads `fd` until the peer closes it (a read returns 0) or `seconds` pass: what it read, and whether it was closed.
private func readUntilClosed(_ fd: Int32, within seconds: Int) -> (text: String, closed: Bool) {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let deadline = ContinuousClock.now + .seconds(seconds)
    var read: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while ContinuousClock.now < deadline {
        guard poll(&descriptor, 1, 200) > 0 else { continue }
        let count = Glibc.read(fd, &buffer, buffer.count)
        if count <= 0 { return (String(decoding: read, as: UTF8.self), true) }
        read += buffer[0..<count]
    }
    return (String(decoding: read, as: UTF8.self), false)
}

/// The cloud closes HTTP connections that say nothing, or stall in a request's head, after `--idle-timeout`
/// (before, 10,000 idle connections held 133 MB and a slow client held its connection for ever); the daemon's
/// realtime WebSocket is not subject to it.
@Suite(.serialized) struct CloudIdleTimeoutTests {
    @Test func silentAndStalledConnectionsAreClosedAndTheRealtimeLinkIsNot() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--idle-timeout", "1"])
        defer { cluster.stop() }
        try await cluster.daemonRealtimeConnected()
        // A connection that says nothing, and one that stalls in a request's head.
        let silent = try #require(LoopbackSockets.connect(port: cluster.cloudPort))
        defer { close(silent) }
        let stalled = try #require(LoopbackSockets.connect(port: cluster.cloudPort))
        defer { close(stalled) }
        let partial = Array("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
        #expect(write(stalled, partial, partial.count) == partial.count)
        // And one that made a request, then went quiet.
        let used = try #require(LoopbackSockets.connect(port: cluster.cloudPort))
        defer { close(used) }
        let request = Array("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        #expect(write(used, request, request.count) == request.count)

        #expect(readUntilClosed(silent, within: 10).closed, "a connection that says nothing is closed")
        #expect(readUntilClosed(stalled, within: 10).closed, "a connection stalled in a request's head is closed")
        #expect(readUntilClosed(used, within: 10).closed, "a connection idle after its request is closed")
        // The daemon's realtime connection lived through the same second: still the first, never made again.
        #expect(try await cluster.stats().connections == 1)
        #expect(
            cluster.daemonLog.components(separatedBy: "realtime connection to the cloud established").count == 2,
            "\(cluster.daemonLog.suffix(1500))"
        )
    }
}

/// Requests NIO's HTTP parser refuses are answered, and their connection closed (before: no answer, and the
/// connection held for 300 s and more).
@Suite(.serialized) struct CloudMalformedRequestTests {
    /// Sends `request` on a new connection; what the cloud wrote before it closed the connection (10 s at most).
    private static func exchange(_ port: Int, _ request: [UInt8]) throws -> String {
        let fd = try #require(LoopbackSockets.connect(port: port))
        defer { close(fd) }
        _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let (answer, closed) = readUntilClosed(fd, within: 10)
        if !closed { Issue.record("the connection was not closed; read: \(answer)") }
        return answer
    }

    @Test func malformedRequestsAreAnsweredAndTheirConnectionClosed() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let port = cluster.cloudPort
        let unknownMethod = try Self.exchange(port, Array("FOO /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(unknownMethod.hasPrefix("HTTP/1.1 501"), "\(unknownMethod)")
        #expect(unknownMethod.contains(#""code":"bad_request""#), "\(unknownMethod)")
        let bigHeader = try Self.exchange(
            port,
            Array("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: \(String(repeating: "a", count: 100_000))\r\n\r\n".utf8)
        )
        #expect(bigHeader.hasPrefix("HTTP/1.1 431"), "\(bigHeader.prefix(200))")
        // A URL over 8 KiB: 414, on a connection's first request (NIO's parser would say 431, as for headers)
        // and on a later one.
        let longURL = "/v1/stats?" + String(repeating: "a", count: 100_000)
        let firstLong = try Self.exchange(port, Array("GET \(longURL) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(firstLong.hasPrefix("HTTP/1.1 414") && firstLong.contains(#""code":"uri_too_long""#), "\(firstLong.prefix(300))")
        let laterLong = try Self.exchange(
            port,
            Array(
                ("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /v1/stats?\(String(repeating: "b", count: 20_000)) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").utf8
            )
        )
        #expect(laterLong.hasPrefix("HTTP/1.1 200") && laterLong.contains("HTTP/1.1 414 URI Too Long"), "\(laterLong.suffix(300))")
        let controlCharacter = try Self.exchange(port, Array("GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\u{0B}b\r\n\r\n".utf8))
        #expect(controlCharacter.hasPrefix("HTTP/1.1 400"), "\(controlCharacter)")
        let rawByte = try Self.exchange(port, Array("GET /v1/st".utf8) + [0xFF] + Array("ats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(rawByte.hasPrefix("HTTP/1.1 400"), "\(rawByte)")
        // A % that starts no escape (an HTTP client library would have encoded it): 400 saying so.
        let alice = try await cluster.login()
        let percent = try Self.exchange(
            port,
            Array(
                "GET /v1/collections/notes/objects?sort=%G1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(alice)\r\nConnection: close\r\n\r\n"
                    .utf8
            )
        )
        #expect(percent.hasPrefix("HTTP/1.1 400") && percent.contains("two hex digits"), "\(percent)")
        // A plain GET of the realtime endpoint (no WebSocket asked): 426 with a body that says what to do.
        let plain = try Self.exchange(port, Array("GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(
            plain.hasPrefix("HTTP/1.1 426") && plain.lowercased().contains("upgrade: websocket") && plain.contains("Upgrade: websocket'"),
            "\(plain)"
        )
        // A refused WebSocket upgrade says why, with the status the spec gives: 401 without a valid token, 503
        // while connections are refused (the WebSocket library's own answer is an empty 400).
        func upgrade(token: String?) throws -> String {
            let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
            return try Self.exchange(
                port,
                Array(
                    ("GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                        + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\(authorization)\r\n").utf8
                )
            )
        }
        for token in [nil, "forged"] {
            let refused = try upgrade(token: token)
            #expect(refused.hasPrefix("HTTP/1.1 401") && refused.contains(#""code":"unauthenticated""#), "\(refused)")
        }
        try await cluster.fault(#"{"refuseConnectionsForMs":60000}"#)
        let unavailable = try upgrade(token: alice)
        #expect(unavailable.hasPrefix("HTTP/1.1 503") && unavailable.contains(#""code":"unavailable""#), "\(unavailable)")
        try await cluster.fault("{}")
        // A well-formed request on the same server is still served.
        #expect(try await cluster.stats().connections == 0)
    }
}
