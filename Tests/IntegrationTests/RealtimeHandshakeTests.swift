// Licensed under the Apache License, Version 2.0.

import Foundation
import Synchronization
import Testing

/// A cloud that dies between accepting the realtime connection and answering its upgrade leaves the
/// connection half-closed, and the WebSocket client waiting for an answer forever (it also ignored the
/// engine's stop: the daemon never exited). The daemon gives the handshake up and tries again.
@Suite(.serialized) struct RealtimeHandshakeTests {
    @Test func aHandshakeLeftUnansweredIsGivenUpAndTheDaemonStillStops() async throws {
        let fake = try HalfClosingCloud()
        defer { fake.stop() }
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        try await cluster.startDaemon(extraArguments: ["--cloud-url", "http://127.0.0.1:\(fake.port)"])
        try await eventually("the daemon's first realtime handshake") { fake.handshakes >= 1 }
        try await eventually("a second handshake, once the first is given up", timeout: .seconds(30)) { fake.handshakes >= 2 }
        // The daemon stops although a handshake is unanswered.
        let stopped = try await withTimeout(.seconds(20), "the daemon to stop") {
            await Task.detached { cluster.stopDaemon() }.value
        }
        #expect(stopped == 0)
    }
}

/// Answers a login, and meets every realtime upgrade request by closing its side of the connection
/// without an answer (the connection stays half-open). Anything else gets 503.
final class HalfClosingCloud: Sendable {
    let port: Int
    private let listener: Int32
    private let state = Mutex((handshakes: 0, held: [Int32]()))

    var handshakes: Int { state.withLock { $0.handshakes } }

    init() throws {
        (listener, port) = try LoopbackSockets.listen(backlog: 16, what: "the fake cloud")
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in state.withLock({ $0.held }) { close(fd) }
    }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let request = readHead(connection)
            if request.hasPrefix("POST /v1/auth/login") {
                let body =
                    #"{"accessToken":"fake","expiresIn":3600,"refreshExpiresIn":2592000,"refreshToken":"fake-refresh","tokenType":"Bearer","userId":"alice"}"#
                write(
                    connection,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                )
                close(connection)
            } else if request.hasPrefix("GET /v1/realtime") {
                shutdown(connection, Int32(SHUT_WR))
                state.withLock {
                    $0.handshakes += 1
                    $0.held.append(connection)
                }
            } else {
                write(connection, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                close(connection)
            }
        }
    }

    private func readHead(_ fd: Int32) -> String {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            head.append(byte)
            if head.count >= 4, head.suffix(4) == [13, 10, 13, 10] { break }
        }
        return String(decoding: head, as: UTF8.self)
    }

    private func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            guard written > 0 else { return }
            offset += written
        }
    }
}
