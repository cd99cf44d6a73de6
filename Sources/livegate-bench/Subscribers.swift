// Licensed under the Apache License, Version 2.0.

import Dispatch
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// What one subscriber saw: deliveries of timed updates and their latencies (read time − send stamp), and
/// their send stamps when asked for (``reset(recordLatencies:recordStamps:)``: for `--timeline`).
/// How many timed deliveries a pool's subscribers received in all: what a wait for them reads, one atomic load (not
/// a lock per subscriber, which cost the benchmark's own process N locks a poll).
final class DeliveryCount: Sendable {
    private let value = Atomic<Int>(0)

    func add(_ count: Int) { value.add(count, ordering: .relaxed) }
    func reset() { value.store(0, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

final class Reception: Sendable {
    private struct State {
        var deliveries = 0
        var latencies: [UInt64] = []
        var stamps: [UInt64] = []
        var recordStamps = false
        var markers = 0
        var lastAt: UInt64 = 0
        var recording = true
        /// When reads brought ready markers: the count so far and the read's time, one entry a read.
        var markerArrivals: [(count: Int, at: UInt64)] = []
    }

    private let state = Mutex(State())
    /// The pool's count, told of each timed delivery.
    private let pool: DeliveryCount?

    init(pool: DeliveryCount? = nil) { self.pool = pool }

    func markerSeen() { state.withLock { $0.markers += 1 } }
    /// Whether the ready marker was seen (for the daemon: the token's first fresh state).
    var isReady: Bool { markers > 0 }
    /// How many lines carried the ready marker.
    var markers: Int { state.withLock { $0.markers } }
    /// When the reads that brought ready markers were made (`DispatchTime` nanoseconds), with the count so far.
    var markerArrivals: [(count: Int, at: UInt64)] { state.withLock { $0.markerArrivals } }

    /// Records what one read brought: timed deliveries (their send stamps) and ready markers.
    func record(sentAt stamps: [UInt64], markers: Int, now: UInt64) {
        if !stamps.isEmpty { pool?.add(stamps.count) }
        state.withLock { state in
            state.markers += markers
            if markers > 0 { state.markerArrivals.append((state.markers, now)) }
            guard !stamps.isEmpty else { return }
            state.deliveries += stamps.count
            state.lastAt = now
            if state.recording { state.latencies.append(contentsOf: stamps.lazy.map { now &- $0 }) }
            if state.recording, state.recordStamps { state.stamps.append(contentsOf: stamps) }
        }
    }

    /// Clears the counters for the next measurement.
    func reset(recordLatencies: Bool, recordStamps: Bool = false) {
        state.withLock { state in
            state.deliveries = 0
            state.latencies.removeAll(keepingCapacity: true)
            state.stamps.removeAll(keepingCapacity: true)
            state.recordStamps = recordStamps
            state.lastAt = 0
            state.recording = recordLatencies
        }
    }

    var deliveries: Int { state.withLock { $0.deliveries } }
    var lastAt: UInt64 { state.withLock { $0.lastAt } }
    var latencies: [UInt64] { state.withLock { $0.latencies } }
    /// The send stamps of the timed deliveries, in the order of ``latencies`` (recorded when asked for).
    var stamps: [UInt64] { state.withLock { $0.stamps } }
}

/// Reads a subscriber's byte stream line by line, the same way for the daemon (JSON lines) and Redis (RESP,
/// whose lines end in CRLF): a line with `"t":` followed by a non-zero number is one timed delivery; a line
/// with `readyMarker` makes the subscriber ready. Lines are found with `memchr` and markers with `memmem`, in
/// place in what was read (only a line split between two reads is copied), and each read is recorded with
/// one lock: the subscribers share the machine with the system measured, so they must cost it little. Once
/// a subscriber has seen its ready marker, a timed delivery's line is not searched for it again (it was a
/// second search of every line, for nothing).
final class LineScanner: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    let reception: Reception
    let readyMarker: [UInt8]
    private struct State {
        /// The start of a line whose end has not been read yet.
        var pending: [UInt8] = []
        var sawReadyMarker = false
    }

    private let state = Mutex(State())

    init(reception: Reception, readyMarker: String) {
        self.reception = reception
        self.readyMarker = Array(readyMarker.utf8)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let now = DispatchTime.now().uptimeNanoseconds
        var stamps: [UInt64] = []
        var markers = 0
        state.withLock { state in
            buffer.withUnsafeReadableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                var start = 0
                while start < bytes.count, let found = memchr(base + start, Int32(UInt8(ascii: "\n")), bytes.count - start) {
                    let end = base.distance(to: UnsafeRawPointer(found))
                    if state.pending.isEmpty {
                        scan(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), stamps: &stamps, markers: &markers, state: &state)
                    } else {
                        state.pending.append(contentsOf: bytes[start..<end])
                        var line: [UInt8] = []
                        swap(&line, &state.pending)
                        line.withUnsafeBytes { scan($0, stamps: &stamps, markers: &markers, state: &state) }
                        line.removeAll(keepingCapacity: true)
                        swap(&line, &state.pending)
                    }
                    start = end + 1
                }
                state.pending.append(contentsOf: bytes[start...])
            }
        }
        if !stamps.isEmpty || markers > 0 { reception.record(sentAt: stamps, markers: markers, now: now) }
    }

    private static let marker = Array(#""t":"#.utf8)

    private func scan(_ line: UnsafeRawBufferPointer, stamps: inout [UInt64], markers: inout Int, state: inout State) {
        var stamped = false
        if let at = Self.find(Self.marker, in: line) {
            var value: UInt64 = 0
            var index = at + Self.marker.count
            while index < line.count, line[index] == UInt8(ascii: " ") { index += 1 }  // a stamp's field, right-aligned
            while index < line.count, line[index] >= 0x30, line[index] <= 0x39 {
                value = value * 10 + UInt64(line[index] - 0x30)
                index += 1
            }
            if value != 0 {
                stamps.append(value)
                stamped = true
            }
        }
        guard !(stamped && state.sawReadyMarker) else { return }
        if Self.find(readyMarker, in: line) != nil {
            markers += 1
            state.sawReadyMarker = true
        }
    }

    /// Where `needle` starts in `line`: glibc's `memmem`, one call per line (a `memchr` for the needle's
    /// first byte and a compare at every hit cost ~3 times as much on a JSON line, one call per quote).
    static func find(_ needle: [UInt8], in line: UnsafeRawBufferPointer) -> Int? {
        guard let base = line.baseAddress, line.count >= needle.count else { return nil }
        let found = needle.withUnsafeBytes { memmem(base, line.count, $0.baseAddress, needle.count) }
        return found.map { base.distance(to: UnsafeRawPointer($0)) }
    }

    /// glibc's `memmem`, looked up at run time: Swift's `Glibc` module leaves GNU extensions out.
    private static let memmem: @convention(c) (UnsafeRawPointer?, Int, UnsafeRawPointer?, Int) -> UnsafeMutableRawPointer? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "memmem") else { fatalError("libc has no memmem") }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeRawPointer?, Int, UnsafeRawPointer?, Int) -> UnsafeMutableRawPointer?).self)
    }()
}

/// N subscriber connections to a Unix socket, each sending `greeting` once connected.
struct SubscriberPool {
    let channels: [any Channel]
    let receptions: [Reception]
    /// The timed deliveries of all of them since the last ``resetCounts(recordLatencies:recordStamps:)``.
    let delivered: DeliveryCount

    static func connect(count: Int, socketPath: String, greeting: String, readyMarker: String) async throws -> SubscriberPool {
        var channels: [any Channel] = []
        var receptions: [Reception] = []
        let delivered = DeliveryCount()
        for _ in 0..<count {
            let reception = Reception(pool: delivered)
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
        return SubscriberPool(channels: channels, receptions: receptions, delivered: delivered)
    }

    var readyCount: Int { receptions.filter(\.isReady).count }

    /// Clears every subscriber's counters (and the pool's) for the next measurement.
    func resetCounts(recordLatencies: Bool, recordStamps: Bool = false) {
        for reception in receptions { reception.reset(recordLatencies: recordLatencies, recordStamps: recordStamps) }
        delivered.reset()
    }

    func close() async {
        for channel in channels { try? await channel.close() }
    }
}
