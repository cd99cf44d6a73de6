// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import LiveCloudAPI
import NIOCore
import NIOPosix
import Synchronization

/// An app's start beside another app, with default settings: one connection writes `--turns-burst`
/// `object.observe` at once (distinct objects, new to the daemon each run), while a second connection makes
/// a paced round trip every 2 ms (an `object.observe` with `once` of an object the daemon holds, until its
/// state arrives). Each run starts once the previous burst's topics are unsubscribed. Per run: how long until the burst's every token is loaded, the daemon's CPU for it, and
/// the second connection's round trips idle (just before) and beside the burst; then the medians.
extension Bench {
    func measureTurns(directory: String, bin: String) async throws {
        let (cloud, base, _) = try await startCloud(directory: directory + "/cloud", bin: bin)
        defer { cloud.stop() }
        let daemon = try await startDaemon(directory: directory + "/daemon", cloudURL: base, bin: bin, username: "bench", password: "bench-password")
        defer { daemon.stop() }
        say(
            "turns: \(turnsBurst) object.observe written at once on one connection, beside a second connection's round trip every 2 ms; "
                + "default settings; \(turnsRuns) runs"
        )
        let pinger = try await RoundTripper.connect(socketPath: daemon.socket)
        defer { pinger.close() }
        try await pinger.request(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"bench-beside","protocol":1}}"#, until: #""id":0"#)
        try await pinger.request(
            #"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"turns","id":"held"}}"#,
            until: #""loadingStatus":"loaded""#
        )
        let ping = #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"turns","id":"held","once":true}}"#
        let hello = #"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"bench-burst","protocol":1}}"# + "\n"
        var runs: [(burst: Double, cpu: Double, idle: Percentiles, beside: Percentiles)] = []
        for run in 1...max(1, turnsRuns) {
            let idle = try await pinger.paced(ping, until: #""method":"object.changed""#, every: .milliseconds(2)) { $0 >= 300 }
            var burst = hello
            for k in 0..<turnsBurst {
                burst += #"{"jsonrpc":"2.0","id":\#(k + 1),"method":"object.observe","params":{"collection":"turns","id":"r\#(run)-\#(k)"}}"# + "\n"
            }
            let done = Atomic(false)
            let cpu = daemon.child.cpuClock
            // Where the machine's time goes meanwhile: every process's CPU and the daemon's threads' wait for one.
            let cloudCPU = cloud.cpuClock
            let benchCPU = CPUClock(pid: getpid())
            let daemonWait = CPUClock.runQueueWait(pid: daemon.child.pid)
            let started = DispatchTime.now().uptimeNanoseconds
            async let besideTimes = pinger.paced(ping, until: #""method":"object.changed""#, every: .milliseconds(2)) { _ in
                done.load(ordering: .relaxed)
            }
            let pool: SubscriberPool
            do {
                pool = try await SubscriberPool.connect(
                    count: 1,
                    socketPath: daemon.socket,
                    greeting: burst,
                    readyMarker: #""loadingStatus":"loaded""#
                )
                let deadline = ContinuousClock.now + .seconds(300)
                while pool.receptions[0].markers < turnsBurst {
                    guard ContinuousClock.now < deadline else { throw BenchError("\(pool.receptions[0].markers) of \(turnsBurst) loaded") }
                    try await Task.sleep(for: .milliseconds(1))
                }
            } catch {
                done.store(true, ordering: .relaxed)
                _ = try? await besideTimes
                throw error
            }
            let arrivals = pool.receptions[0].markerArrivals
            let last = arrivals.first { $0.count >= turnsBurst }?.at ?? DispatchTime.now().uptimeNanoseconds
            let cpuSeconds = cpu.seconds
            let others = (cloud: cloudCPU.seconds * 1e3, bench: benchCPU.seconds * 1e3, wait: daemonWait.seconds * 1e3)
            done.store(true, ordering: .relaxed)
            let beside = try await besideTimes
            await pool.close()
            // The next run's idle round trips are idle: the burst's topics linger 2 s, then are unsubscribed.
            let closed = ContinuousClock.now
            while case let left = try await cloudStats(base).subscriptions.keys.filter({ $0.hasPrefix("object:turns/") }), left.count > 1 {
                guard ContinuousClock.now - closed < .seconds(120) else {
                    throw BenchError("\(left.count) of the burst's topics stayed subscribed, among them \(left.sorted().prefix(3))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let row = (burst: Double(last &- started) / 1e6, cpu: cpuSeconds * 1e3, idle: idle, beside: beside)
            runs.append(row)
            let busy = (row.cpu + others.cloud + others.bench) / row.burst
            say(
                "  run \(run): all \(turnsBurst) loaded after \(format(row.burst)) ms (CPU: daemon \(format(row.cpu)), "
                    + "cloud \(format(others.cloud)), bench \(format(others.bench)) ms, \(format(busy)) cores busy of "
                    + "\(ProcessInfo.processInfo.activeProcessorCount); the daemon's threads waited \(format(others.wait)) ms for a CPU); "
                    + "the other connection's round trip idle p50 \(format(idle.p50)) / p99 \(format(idle.p99)) ms (\(idle.count)), "
                    + "beside the burst p50 \(format(beside.p50)) / p99 \(format(beside.p99)) ms (\(beside.count))"
            )
        }
        let median: ([Double]) -> String = medianAndRange
        say(
            "  medians over \(runs.count) runs: all loaded after \(median(runs.map(\.burst))) ms, daemon CPU \(median(runs.map(\.cpu))) ms; "
                + "round trip p99 idle \(median(runs.map(\.idle.p99))) ms, beside \(median(runs.map(\.beside.p99))) ms; "
                + "p50 idle \(median(runs.map(\.idle.p50))) ms, beside \(median(runs.map(\.beside.p50))) ms"
        )
    }
}

/// Round-trip latencies in milliseconds.
struct Percentiles {
    var count: Int
    var p50: Double
    var p99: Double

    init(_ milliseconds: [Double]) {
        let sorted = milliseconds.sorted()
        count = sorted.count
        func at(_ fraction: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
        }
        p50 = at(0.5)
        p99 = at(0.99)
    }
}

/// A connection that sends one request at a time and times it until a line carrying a marker arrives.
final class RoundTripper: Sendable {
    private let channel: any Channel
    private let lines: LineInbox

    /// The round trips' own thread: on the shared loops, a round trip's answer waited behind the burst's
    /// thousands of notifications read on the same loop, and the bench measured itself.
    private static let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    static func connect(socketPath: String) async throws -> RoundTripper {
        let inbox = LineInbox()
        let channel = try await ClientBootstrap(group: Self.loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(LineSplitter(inbox: inbox)) }
            }
            .connect(unixDomainSocketPath: socketPath).get()
        return RoundTripper(channel: channel, lines: inbox)
    }

    private init(channel: any Channel, lines: LineInbox) {
        self.channel = channel
        self.lines = lines
    }

    /// Sends `line` and waits for a line containing `marker`; the milliseconds it took.
    @discardableResult
    func request(_ line: String, until marker: String) async throws -> Double {
        lines.expect(marker)
        let sent = DispatchTime.now().uptimeNanoseconds
        try await channel.writeAndFlush(ByteBuffer(string: line + "\n"))
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            if let at = lines.arrival() { return Double(at &- sent) / 1e6 }
            guard ContinuousClock.now < deadline else { throw BenchError("no \(marker) within 120 s") }
            try await Task.sleep(for: .microseconds(100))
        }
    }

    /// Round trips of `line`, one started every `interval` (or at once after a slower one), until `stop` says
    /// so (given how many were made).
    func paced(_ line: String, until marker: String, every interval: Duration, stop: @Sendable (Int) -> Bool) async throws -> Percentiles {
        var times: [Double] = []
        var next = ContinuousClock.now
        while !stop(times.count) {
            times.append(try await request(line, until: marker))
            next += interval
            if next > .now { try await Task.sleep(until: next) } else { next = .now }
        }
        return Percentiles(times)
    }

    func close() { channel.close(promise: nil) }
}

/// The marker a round trip waits for and when a line carrying it arrived (stamped on the event loop).
final class LineInbox: Sendable {
    private struct State {
        var marker: [UInt8] = []
        var arrivedAt: UInt64?
    }
    private let state = Mutex(State())

    func expect(_ marker: String) { state.withLock { $0 = State(marker: Array(marker.utf8)) } }
    func arrival() -> UInt64? { state.withLock { $0.arrivedAt } }

    func received(_ line: UnsafeRawBufferPointer, at now: UInt64) {
        state.withLock { state in
            guard state.arrivedAt == nil, !state.marker.isEmpty, LineScanner.find(state.marker, in: line) != nil else { return }
            state.arrivedAt = now
        }
    }
}

/// Splits what arrives into lines and hands each to the inbox.
final class LineSplitter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let inbox: LineInbox
    private let pending = Mutex<[UInt8]>([])

    init(inbox: LineInbox) { self.inbox = inbox }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let now = DispatchTime.now().uptimeNanoseconds
        pending.withLock { pending in
            pending.append(contentsOf: buffer.readableBytesView)
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                pending.withUnsafeBytes { inbox.received(UnsafeRawBufferPointer(rebasing: $0[start..<newline]), at: now) }
                start = newline + 1
            }
            pending.removeFirst(start)
        }
    }
}
