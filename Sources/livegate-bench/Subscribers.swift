// Licensed under the Apache License, Version 2.0.

import Dispatch
import NIOCore
import NIOPosix
import Synchronization

/// What one subscriber saw: deliveries of timed updates and their latencies (read time − send stamp).
final class Reception: Sendable {
    private struct State {
        var deliveries = 0
        var latencies: [UInt64] = []
        var markers = 0
        var lastAt: UInt64 = 0
        var recording = true
    }

    private let state = Mutex(State())

    func markerSeen() { state.withLock { $0.markers += 1 } }
    /// Whether the ready marker was seen (for the daemon: the token's first fresh state).
    var isReady: Bool { markers > 0 }
    /// How many lines carried the ready marker.
    var markers: Int { state.withLock { $0.markers } }

    func record(sentAt: UInt64, now: UInt64) {
        state.withLock { state in
            state.deliveries += 1
            state.lastAt = now
            if state.recording { state.latencies.append(now &- sentAt) }
        }
    }

    /// Clears the counters for the next measurement.
    func reset(recordLatencies: Bool) {
        state.withLock { state in
            state.deliveries = 0
            state.latencies.removeAll(keepingCapacity: true)
            state.lastAt = 0
            state.recording = recordLatencies
        }
    }

    var deliveries: Int { state.withLock { $0.deliveries } }
    var lastAt: UInt64 { state.withLock { $0.lastAt } }
    var latencies: [UInt64] { state.withLock { $0.latencies } }
}

/// Reads a subscriber's byte stream line by line, the same way for the daemon (JSON lines) and Redis (RESP,
/// whose lines end in CRLF): a line with `"t":` followed by a non-zero number is one timed delivery; a line
/// with `readyMarker` makes the subscriber ready.
final class LineScanner: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    let reception: Reception
    let readyMarker: [UInt8]
    private let pending = Mutex<[UInt8]>([])

    init(reception: Reception, readyMarker: String) {
        self.reception = reception
        self.readyMarker = Array(readyMarker.utf8)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let now = DispatchTime.now().uptimeNanoseconds
        pending.withLock { pending in
            pending.append(contentsOf: buffer.readableBytesView)
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                scan(pending[start..<newline], now: now)
                start = newline + 1
            }
            pending.removeFirst(start)
        }
    }

    private static let marker = Array(#""t":"#.utf8)

    private func scan(_ line: ArraySlice<UInt8>, now: UInt64) {
        if let at = Self.find(Self.marker, in: line) {
            var value: UInt64 = 0
            var index = at + Self.marker.count
            while index < line.endIndex, line[index] >= 0x30, line[index] <= 0x39 {
                value = value * 10 + UInt64(line[index] - 0x30)
                index += 1
            }
            if value != 0 { reception.record(sentAt: value, now: now) }
        }
        if Self.find(readyMarker, in: line) != nil { reception.markerSeen() }
    }

    private static func find(_ needle: [UInt8], in line: ArraySlice<UInt8>) -> Int? {
        guard line.count >= needle.count, let first = needle.first else { return nil }
        var index = line.startIndex
        while index <= line.endIndex - needle.count {
            if line[index] == first, line[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}

/// N subscriber connections to a Unix socket, each sending `greeting` once connected.
struct SubscriberPool {
    let channels: [any Channel]
    let receptions: [Reception]

    static func connect(count: Int, socketPath: String, greeting: String, readyMarker: String) async throws -> SubscriberPool {
        var channels: [any Channel] = []
        var receptions: [Reception] = []
        for _ in 0..<count {
            let reception = Reception()
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(LineScanner(reception: reception, readyMarker: readyMarker))
                    }
                }
                .connect(unixDomainSocketPath: socketPath).get()
            try await channel.writeAndFlush(ByteBuffer(string: greeting))
            channels.append(channel)
            receptions.append(reception)
            // One at a time: a burst of connects beyond the server's listen backlog makes a non-blocking
            // Unix-socket connect fail with EAGAIN, which NIO does not retry.
            let deadline = ContinuousClock.now + .seconds(30)
            while !reception.isReady {
                guard ContinuousClock.now < deadline else { throw BenchError("subscriber \(channels.count) was not ready within 30 s") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        return SubscriberPool(channels: channels, receptions: receptions)
    }

    var readyCount: Int { receptions.filter(\.isReady).count }

    func close() async {
        for channel in channels { try? await channel.close() }
    }
}
