// Licensed under the Apache License, Version 2.0.

import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// Many light connections to the daemon for load tests: each sends a greeting and records, per token, the
/// versions its notifications carried (object snapshots) and every line it read.
final class LineClient: Sendable {
    private final class Reader: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let client: LineClient
        init(_ client: LineClient) { self.client = client }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { client.received(unwrapInboundIn(data)) }
        func channelInactive(context: ChannelHandlerContext) { client.closedByPeer() }
    }

    private struct State {
        var pending: [UInt8] = []
        var lines: [String] = []
        var versions: [Int64] = []
        var closed = false
    }

    private let state = Mutex(State())
    private let channelBox = Mutex<(any Channel)?>(nil)

    static func connect(_ socketPath: String, greeting: String) async throws -> LineClient {
        let client = LineClient()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Reader(client)) }
            }
            .connect(unixDomainSocketPath: socketPath).get()
        client.channelBox.withLock { $0 = channel }
        try await channel.writeAndFlush(ByteBuffer(string: greeting))
        return client
    }

    fileprivate func received(_ buffer: ByteBuffer) {
        state.withLock { state in
            state.pending.append(contentsOf: buffer.readableBytesView)
            while let newline = state.pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: state.pending[..<newline], as: UTF8.self)
                state.pending.removeSubrange(...newline)
                state.lines.append(line)
                if line.contains(#""method":"object.changed""#), let range = line.range(of: #""version":"#) {
                    let digits = line[range.upperBound...].prefix { $0.isNumber }
                    if let version = Int64(digits) { state.versions.append(version) }
                }
            }
        }
    }

    fileprivate func closedByPeer() { state.withLock { $0.closed = true } }

    var versions: [Int64] { state.withLock { $0.versions } }
    var lines: [String] { state.withLock { $0.lines } }
    var isClosed: Bool { state.withLock { $0.closed } }

    func send(_ text: String) async throws {
        guard let channel = channelBox.withLock({ $0 }) else { return }
        try await channel.writeAndFlush(ByteBuffer(string: text))
    }

    func close() async {
        try? await channelBox.withLock({ $0 })?.close()
    }
}

/// A client that connects, sends a greeting, and never reads: its receive buffer is made small so that the
/// daemon's writes to it stall soon.
struct StalledClient {
    let fd: Int32

    init(_ socketPath: String, greeting: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("socket() failed") }
        var size: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socketPath.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw ClusterError("connect() failed: \(errno)") }
        _ = greeting.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    }

    /// Reads everything left until the daemon closes the socket; returns it (nil if it stays open past `timeout`).
    func drainUntilClosed(timeout: Duration) async throws -> String? {
        let fd = fd
        let deadline = ContinuousClock.now + timeout
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 50) > 0 {
                let count = read(fd, &buffer, buffer.count)
                if count <= 0 { return String(decoding: data, as: UTF8.self) }
                data.append(contentsOf: buffer[0..<count])
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        return nil
    }

    func close() { _ = Glibc.close(fd) }
}
