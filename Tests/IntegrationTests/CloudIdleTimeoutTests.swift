// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import Testing

/// The cloud closes HTTP connections that say nothing, or stall in a request's head, after `--idle-timeout`
/// (before, 10,000 idle connections held 133 MB and a slow client held its connection for ever); the daemon's
/// realtime WebSocket is not subject to it.
@Suite(.serialized) struct CloudIdleTimeoutTests {
    /// Reads `fd` until the peer closes it (read returns 0), for at most `seconds`; whether it did.
    private static func closedByPeer(_ fd: Int32, within seconds: Int32) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = ContinuousClock.now + .seconds(Int(seconds))
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            guard poll(&descriptor, 1, 200) > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { return true }
        }
        return false
    }

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

        #expect(Self.closedByPeer(silent, within: 10), "a connection that says nothing is closed")
        #expect(Self.closedByPeer(stalled, within: 10), "a connection stalled in a request's head is closed")
        #expect(Self.closedByPeer(used, within: 10), "a connection idle after its request is closed")
        // The daemon's realtime connection lived through the same second: still the first, never made again.
        #expect(try await cluster.stats().connections == 1)
        #expect(
            cluster.daemonLog.components(separatedBy: "realtime connection to the cloud established").count == 2,
            "\(cluster.daemonLog.suffix(1500))"
        )
    }
}
