// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `livegate-cloud` stops on SIGTERM whatever its connections are doing: a client that connected and said
/// nothing, one that sent part of a request, realtime WebSockets whose clients never answer (each told with a
/// close frame, 1001 and why), and a daemon's realtime connection. (Hummingbird's graceful shutdown waited for
/// the first request of each connection, and the realtime route for the client's next message: the cloud never
/// stopped until it was killed.)
@Suite(.serialized) struct CloudShutdownTests {
    /// A TCP connection to the cloud, with a receive timeout.
    func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ClusterError("connect: errno \(errno)") }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    func send(_ fd: Int32, _ text: String) {
        _ = text.utf8CString.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count - 1, 0) }
    }

    /// What the peer sends until it closes the connection (or the timeout).
    func readToEnd(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { return received }
            received += buffer[0..<n]
        }
    }

    /// How many realtime WebSockets the test opens.
    static let webSocketCount = 40

    @Test func theCloudStopsOnSIGTERMWhateverItsConnectionsAreDoing() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        let silent = try connect(port: cluster.cloudPort)
        let partial = try connect(port: cluster.cloudPort)
        send(partial, "GET /v1/hea")
        // Several WebSockets: the close on shutdown raced with the connection's end (swift-websocket's own close
        // ran in a task of its own; when it won, the route returned and the connection could end before that
        // task wrote its frame: about 1 connection in 50). Each connection is a draw of that race.
        var webSockets: [Int32] = []
        defer { for fd in [silent, partial] + webSockets { close(fd) } }
        for _ in 0..<Self.webSocketCount {
            let webSocket = try connect(port: cluster.cloudPort)
            webSockets.append(webSocket)
            send(
                webSocket,
                "GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer \(token)\r\n\r\n"
            )
        }
        for webSocket in webSockets {
            var head: [UInt8] = []
            var byte: UInt8 = 0
            while head.suffix(4) != ArraySlice("\r\n\r\n".utf8), recv(webSocket, &byte, 1, 0) == 1 { head.append(byte) }
            #expect(
                String(decoding: head, as: UTF8.self).hasPrefix("HTTP/1.1 101"),
                "the WebSocket upgrade: \(String(decoding: head, as: UTF8.self))"
            )
        }
        // Nothing here has a request in flight, so the cloud has nothing to wait for (it takes ~10 ms here).
        let problem = cluster.stopCloudCleanly(deadline: .seconds(5))
        #expect(problem == nil, "\(problem ?? "")")
        // Every WebSocket client was told with a close frame (1001, going away, and why); every connection ended.
        let reason = Array("the cloud is shutting down; reconnect later".utf8)
        let closeFrame: [UInt8] = [0x88, UInt8(2 + reason.count), 0x03, 0xE9] + reason
        let told = webSockets.map { readToEnd($0) }
        let untold = told.filter { $0 != closeFrame }
        #expect(
            untold.count == 0,
            "\(untold.count) of \(told.count) WebSocket clients were not sent the close frame, but: \(untold.prefix(3).map { Array($0.prefix(8)) })"
        )
        #expect(readToEnd(silent).isEmpty && readToEnd(partial).isEmpty)
        // The daemon's realtime connection ended too, and it reconnects to the cloud's next run.
        try await cluster.restartCloud()
        try await eventually("the daemon reconnects", timeout: .seconds(30)) { try await cluster.stats().connections == 1 }
    }
}
