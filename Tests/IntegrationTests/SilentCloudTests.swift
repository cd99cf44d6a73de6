// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Synchronization
import Testing

/// A cloud that goes silent without closing (a network partition, a host gone, a hung process): the daemon's
/// connections to it stay open and nothing comes. The daemon must notice (its realtime connection pings the
/// cloud), say so to the clients that watch the session, and once the cloud is reachable again resume its
/// topics, so that what the cloud sent into the silence still arrives. Meanwhile cached copies are answered
/// without waiting on questions the cloud does not answer.
@Suite(.serialized) struct SilentCloudTests {
    static let hello = #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"t","protocol":1}}"#

    @Test func aCloudGoneSilentIsNoticedAndWhatItSentMeanwhileArrives() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let proxy = try PartitionProxy(upstreamPort: cluster.cloudPort)
        defer { proxy.stop() }
        let config = cluster.directory + "/livegated.conf"
        try "realtime-ping-seconds = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await cluster.startDaemon(
            extraArguments: ["--cloud-url", "http://127.0.0.1:\(proxy.port)", "--config", config, "--log-level", "trace"]
        )
        try await cluster.put("notes", "n1", ["v": 1])
        try await RawConnection.with(cluster.socketPath) { client in
            try await client.send(Self.hello)
            _ = try await client.next()
            try await client.send(#"{"jsonrpc":"2.0","id":2,"method":"session.state","params":{"watch":true}}"#)
            _ = try await elements(client.lines, until: "the realtime connection") { $0.contains(#""connection":"connected""#) }
            try await client.send(#"{"jsonrpc":"2.0","id":3,"method":"object.observe","params":{"collection":"notes","id":"n1"}}"#)
            _ = try await elements(client.lines, until: "the cloud's copy") { $0.contains(#""dataStatus":"fresh""#) && $0.contains(#""v":1"#) }
            // A cloud that answers the pings keeps the connection (the WebSocket's frames are traced in the log).
            try await eventually("three pings answered", timeout: .seconds(15)) { Self.pongs(in: cluster.daemonLog) >= 3 }
            #expect(!cluster.daemonLog.contains("realtime connection lost"))

            // Every connection through the proxy goes silent, and the cloud publishes a change into the silence.
            proxy.partition()
            try await cluster.put("notes", "n1", ["v": 2])
            // Pinged each second, the daemon gives the connection up when a ping is unanswered at the next:
            // within about 2 s (10 s allowed). Nothing else reaches the client meanwhile.
            let lost = try await client.next(timeout: .seconds(10))
            #expect(lost.contains(#""method":"session.changed""#) && lost.contains(#""connection":"reconnecting""#), "\(lost)")
            #expect(cluster.daemonLog.contains("no answer to a ping"), "the log says why the connection was given up")

            // Reachable again (the silent connections stay dead: the far side forgot them): the daemon connects
            // anew and resumes its topic from the last event it heard, so the change sent into the silence arrives.
            proxy.heal()
            _ = try await elements(client.lines, until: "the change sent while the cloud was silent") {
                $0.contains(#""method":"object.changed""#) && $0.contains(#""v":2"#)
            }

            // The HTTP connection the daemon read n1 on went silent too, and stays so: an object observed now
            // is read on a new one (taking the silent one, the readability question waited out its 2 s, a
            // fetch its 10 s).
            try await cluster.put("notes", "n2", ["v": 1])
            let asked = ContinuousClock.now
            try await client.send(#"{"jsonrpc":"2.0","id":4,"method":"object.observe","params":{"collection":"notes","id":"n2"}}"#)
            _ = try await elements(client.lines, until: "n2's copy from the cloud") {
                $0.contains(#""dataStatus":"fresh""#) && $0.contains(#""id":"n2""#)
            }
            let waited = ContinuousClock.now - asked
            #expect(waited < .seconds(1), "n2 came after \(waited)")
        }
    }

    @Test func cachedCopiesAreAnsweredWhileTheCloudDoesNotAnswer() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let proxy = try PartitionProxy(upstreamPort: cluster.cloudPort)
        defer { proxy.stop() }
        // Pinged seldom: the connection still counts as up while its cloud is silent, so observations ask it
        // whether their collection is readable.
        let config = cluster.directory + "/livegated.conf"
        try "realtime-ping-seconds = 3600\n".write(toFile: config, atomically: true, encoding: .utf8)
        let arguments = ["--cloud-url", "http://127.0.0.1:\(proxy.port)", "--config", config]
        for id in ["a", "b", "c"] { try await cluster.put("notes", id, ["id": .string(id)]) }
        try await cluster.startDaemon(extraArguments: arguments)
        let observes = ["a", "b", "c"].enumerated().map { index, id in
            #"{"jsonrpc":"2.0","id":\#(index + 10),"method":"object.observe","params":{"collection":"notes","id":"\#(id)"}}"#
        }
        // The cache gets the three objects; the next daemon starts with them and knows nothing of what the
        // cloud lets it read.
        try await RawConnection.with(cluster.socketPath) { client in
            try await client.send(Self.hello)
            _ = try await client.next()
            for line in observes { try await client.send(line) }
            for _ in observes { _ = try await elements(client.lines, until: "a cloud's copy") { $0.contains(#""dataStatus":"fresh""#) } }
        }
        #expect(cluster.stopDaemon() == 0)
        try await cluster.startDaemon(extraArguments: arguments)
        // Only once the daemon takes its realtime connection as made does an observation ask the cloud.
        try await cluster.daemonRealtimeConnected()
        proxy.partition()
        try await RawConnection.with(cluster.socketPath) { client in
            try await client.send(Self.hello)
            _ = try await client.next()
            let sent = ContinuousClock.now
            for line in observes { try await client.send(line) }
            // The first asks the cloud whether notes is readable and waits at most 2 s for no answer; the others
            // do not ask again (they waited the HTTP client's 10 s each, one after another).
            for _ in observes { _ = try await elements(client.lines, until: "a cached copy") { $0.contains(#""dataStatus":"local""#) } }
            let waited = ContinuousClock.now - sent
            #expect(waited < .seconds(6), "the cached copies took \(waited)")
        }
        #expect(cluster.daemonLog.contains("did not answer whether the collection is readable"))
    }

    /// How many pong frames the daemon's trace log says it received.
    static func pongs(in log: String) -> Int {
        log.split(separator: "\n").count { $0.contains("Received WebSocketFrame(") && $0.contains("pong") }
    }
}

/// A TCP proxy to a port on 127.0.0.1 that can partition the network: ``partition()`` silences every
/// connection open through it for good (what either side sends is dropped; neither is closed, as when the far
/// side of a partition forgets a connection), and so every new one until ``heal()``.
final class PartitionProxy: Sendable {
    let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private struct State {
        var partitioned = false
        /// Connections by number: their two sockets (the upstream one `-1` for a connection made while
        /// partitioned), whether they were silenced, and how many of their pumps still run.
        var connections: [Int: (client: Int32, upstream: Int32, silenced: Bool, pumps: Int)] = [:]
        var next = 0
    }
    private let state = Mutex(State())

    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try LoopbackSockets.listen(backlog: 64, what: "the proxy")
        Thread { [self] in serve() }.start()
    }

    func partition() {
        state.withLock {
            $0.partitioned = true
            for key in $0.connections.keys { $0.connections[key]?.silenced = true }
        }
    }

    func heal() { state.withLock { $0.partitioned = false } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        // The pumps see their sockets end, and the last of a connection's closes them.
        for connection in state.withLock({ $0.connections.values }) {
            shutdown(connection.client, Int32(SHUT_RDWR))
            if connection.upstream >= 0 { shutdown(connection.upstream, Int32(SHUT_RDWR)) }
        }
    }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let silent = state.withLock { state -> Int? in
                guard state.partitioned else { return nil }
                state.next += 1
                state.connections[state.next] = (client, -1, true, 1)
                return state.next
            }
            if let silent {
                Thread { [self] in pump(silent, from: client, to: -1) }.start()
                continue
            }
            guard let upstream = LoopbackSockets.connect(port: upstreamPort) else {
                close(client)
                continue
            }
            let number = state.withLock {
                $0.next += 1
                $0.connections[$0.next] = (client, upstream, false, 2)
                return $0.next
            }
            Thread { [self] in pump(number, from: client, to: upstream) }.start()
            Thread { [self] in pump(number, from: upstream, to: client) }.start()
        }
    }

    /// Copies what `source` sends to `destination` until either ends, and drops it once the connection is
    /// silenced (an end is then not passed on either).
    private func pump(_ number: Int, from source: Int32, to destination: Int32) {
        defer {
            let ended = state.withLock { state -> (Int32, Int32)? in
                guard var connection = state.connections[number] else { return nil }
                connection.pumps -= 1
                state.connections[number] = connection.pumps == 0 ? nil : connection
                return connection.pumps == 0 ? (connection.client, connection.upstream) : nil
            }
            if let (client, upstream) = ended {
                close(client)
                if upstream >= 0 { close(upstream) }
            }
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress!, $0.count) }
            let silenced = state.withLock { $0.connections[number]?.silenced ?? true }
            if count <= 0 {
                if !silenced { shutdown(destination, Int32(SHUT_WR)) }
                return
            }
            if silenced { continue }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + offset, count - offset) }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
