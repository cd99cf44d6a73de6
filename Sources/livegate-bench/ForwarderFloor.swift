// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveEventLoops
import Logging
import NIOCore
import NIOPosix
import Synchronization
import WSClient

/// The fan-out floor of livegated's design: a process that does only what no daemon of this design can skip.
/// It reads the cloud's realtime WebSocket with the daemon's client (WSClient) on a loop of its own (as the
/// engine's), and writes every text frame, as it came and with a newline, to every client of its Unix socket on
/// the client event loops (as many as the daemon's default): the same bytes to all, one hop between the loops
/// per batch of frames read, one flush per client per batch. No parse, no cache, no state, no notification of
/// its own, no coalescing, no queue bound: the cost of the transport, the framework and the hand-off alone.
/// `livegate-bench` runs it beside livegated and Redis (`--skip-floor` leaves it out): what livegated spends
/// above it is the engine's and the daemon's own work; what it spends above Redis, the design's.
///
/// Routed (``serve(cloudURL:routedTopics:socketPath:clientLoops:)``, the many-updates run's floor): many topics,
/// each frame to the clients that asked for its topic only, found by scanning the frame for its `"topic":"…"`
/// (no parse): what a daemon of this design cannot skip when every update goes to another client.
enum ForwarderFloor {
    /// What a client reads first, once connected: the line the benchmark's subscribers wait for.
    static let readyLine = #"{"floor":"ready"}"# + "\n"
    static let readyMarker = #""floor":"ready""#

    /// Subscribes to `topic`, then serves until the process is ended (the benchmark's SIGTERM); its socket
    /// listens once the subscription is acknowledged. `clientLoops`: the daemon's default, one fewer than the
    /// cores, at least one.
    static func serve(cloudURL: String, topic: Topic, socketPath: String, clientLoops: Int) async throws {
        try await serve(cloudURL: cloudURL, topics: [topic], routes: nil, socketPath: socketPath, clientLoops: clientLoops)
    }

    /// The routed floor: subscribes to every one of `routedTopics` (in batches, as the engine does), then serves.
    /// A client writes the topics it wants, one a line, then a line `.`; it is told it is ready once they are
    /// registered, and from then on gets each frame of those topics only.
    ///
    /// - Parameter workPerFrame: CPU time spent on the reader's loop for each frame before it is forwarded (a
    ///   spin on the clock): a daemon that did that much work of its own per event, to find the work at which
    ///   the latency's tail leaves a target on this machine.
    static func serve(
        cloudURL: String,
        routedTopics: [Topic],
        workPerFrame: Duration = .zero,
        socketPath: String,
        clientLoops: Int
    ) async throws {
        try await serve(
            cloudURL: cloudURL,
            topics: routedTopics,
            routes: FloorRoutes(),
            workPerFrame: workPerFrame,
            socketPath: socketPath,
            clientLoops: clientLoops
        )
    }

    private static func serve(
        cloudURL: String,
        topics: [Topic],
        routes: FloorRoutes?,
        workPerFrame: Duration = .zero,
        socketPath: String,
        clientLoops: Int
    ) async throws {
        let readerGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: clientLoops)
        let fanouts = clientGroup.makeIterator().map { LoopFanout(eventLoop: $0) }
        let loop = readerGroup.next()
        let subscribed = loop.makePromise(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let ended = BenchError("the load cloud closed the forwarder floor's WebSocket")
                do {
                    try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop: loop)) {
                        try await forward(
                            from: cloudURL,
                            topics: topics,
                            routes: routes,
                            workPerFrame: workPerFrame,
                            on: loop,
                            to: fanouts,
                            subscribed: subscribed
                        )
                    }
                } catch {
                    // Never connected or subscribed: the wait below ends too (a promise completes once).
                    subscribed.fail(error)
                    throw error
                }
                subscribed.fail(ended)
                throw ended
            }
            try await subscribed.futureResult.get()
            let server = try await ServerBootstrap(group: clientGroup)
                .childChannelInitializer { channel in
                    let fanout = fanouts.first { $0.eventLoop === channel.eventLoop } ?? fanouts[0]
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(FloorClientHandler(fanout: fanout, routes: routes))
                    }
                }
                .bind(unixDomainSocketPath: socketPath, cleanupExistingSocketFile: true).get()
            defer { server.close(promise: nil) }
            try await group.next()
        }
    }

    /// Reads the realtime WebSocket on `loop`: the first messages must be the subscriptions' acks, every later
    /// text frame goes to every client (or, with `routes`, to the clients of its topic).
    private static func forward(
        from cloudURL: String,
        topics: [Topic],
        routes: FloorRoutes?,
        workPerFrame: Duration,
        on loop: any EventLoop,
        to fanouts: [LoopFanout],
        subscribed: EventLoopPromise<Void>
    ) async throws {
        try await WebSocketClient.connect(
            url: cloudURL,
            configuration: WebSocketClientConfiguration(maxFrameSize: 1 << 24),
            eventLoopGroup: loop,
            logger: Logger(label: "floor", factory: { _ in SwiftLogNoOpLogHandler() })
        ) { inbound, outbound, _ in
            var ref: Int64 = 0
            for start in stride(from: 0, to: topics.count, by: RealtimeClientBatch.maximumRequests) {
                let requests = topics[start..<min(topics.count, start + RealtimeClientBatch.maximumRequests)].map { topic in
                    ref += 1
                    return RealtimeClientMessage(op: .subscribe, ref: ref, topic: topic)
                }
                let text =
                    requests.count == 1
                    ? try JSONEncoder().encode(requests[0]) : try JSONEncoder().encode(RealtimeClientBatch(requests: requests))
                try await outbound.write(.text(String(decoding: text, as: UTF8.self)))
            }
            var frames = inbound.makeAsyncIterator()
            var acknowledged = 0
            while let frame = try await frames.next() {
                guard frame.opcode == .text, frame.fin else { continue }
                guard acknowledged == topics.count else {
                    let answer = try CloudJSON.decodeRealtimeMessage(from: String(buffer: frame.data))
                    guard answer.op == .ack, let answered = answer.ref, answered >= 1, answered <= ref else {
                        throw BenchError("the load cloud did not acknowledge the floor's subscriptions: \(answer)")
                    }
                    acknowledged += 1
                    if acknowledged == topics.count { subscribed.succeed() }
                    continue
                }
                // One copy, as the daemon's notification body is one: the frame's bytes and a newline.
                var line = ByteBuffer()
                line.reserveCapacity(frame.data.readableBytes + 1)
                line.writeImmutableBuffer(frame.data)
                line.writeInteger(UInt8(ascii: "\n"))
                if workPerFrame > .zero {
                    let until = ContinuousClock.now + workPerFrame
                    while ContinuousClock.now < until {}
                }
                if let routes {
                    guard let topic = topicText(of: frame.data) else { continue }
                    for client in routes.clients(of: topic) { client.fanout.offer(line, to: client.channel) }
                } else {
                    for fanout in fanouts { fanout.offer(line) }
                }
            }
        }
    }

    private static let topicMember = Array(#""topic":""#.utf8)

    /// The text of a frame's `"topic":"…"` member, found by scanning its bytes (the cloud's topics need no escape).
    static func topicText(of frame: ByteBuffer) -> String? {
        frame.withUnsafeReadableBytes { bytes -> String? in
            guard let at = LineScanner.find(topicMember, in: bytes) else { return nil }
            let start = at + topicMember.count
            guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
    }
}

/// The routed floor's clients by topic: registered from the client loops, read by the WebSocket's.
final class FloorRoutes: Sendable {
    struct Client: Sendable {
        var fanout: LoopFanout
        var channel: any Channel
    }

    private let routes = Mutex([String: [Client]]())

    func add(_ topic: String, _ client: Client) { routes.withLock { $0[topic, default: []].append(client) } }

    func remove(_ channel: any Channel) {
        routes.withLock { routes in
            for topic in Array(routes.keys) { routes[topic]?.removeAll { $0.channel === channel } }
        }
    }

    func clients(of topic: String) -> [Client] { routes.withLock { $0[topic] ?? [] } }
}

/// One client event loop's clients, and the lines offered to them since its last batch (written on the loop).
final class LoopFanout: Sendable {
    private struct State {
        var clients: [ObjectIdentifier: any Channel] = [:]
        var pending: [ByteBuffer] = []
        /// Lines for one client each (the routed floor).
        var routed: [(channel: any Channel, line: ByteBuffer)] = []
        var scheduled = false
    }

    let eventLoop: any EventLoop
    private let state = Mutex(State())

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func add(_ channel: any Channel) { state.withLock { $0.clients[ObjectIdentifier(channel)] = channel } }
    func remove(_ channel: any Channel) { _ = state.withLock { $0.clients.removeValue(forKey: ObjectIdentifier(channel)) } }

    /// From the reader's loop: queued, and one task on this loop per batch writes what was queued.
    func offer(_ line: ByteBuffer) {
        let schedule = state.withLock { state -> Bool in
            state.pending.append(line)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { eventLoop.execute { self.writeBatch() } }
    }

    /// From the reader's loop: `line` for `channel` alone, written with the batch.
    func offer(_ line: ByteBuffer, to channel: any Channel) {
        let schedule = state.withLock { state -> Bool in
            state.routed.append((channel, line))
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { eventLoop.execute { self.writeBatch() } }
    }

    private func writeBatch() {
        let (lines, routed, clients) = state.withLock {
            state -> ([ByteBuffer], [(channel: any Channel, line: ByteBuffer)], Dictionary<ObjectIdentifier, any Channel>.Values) in
            var lines: [ByteBuffer] = []
            var routed: [(channel: any Channel, line: ByteBuffer)] = []
            swap(&lines, &state.pending)
            swap(&routed, &state.routed)
            state.scheduled = false
            return (lines, routed, state.clients.values)
        }
        if !lines.isEmpty {
            for client in clients {
                for line in lines { client.write(line, promise: nil) }
                client.flush()
            }
        }
        guard !routed.isEmpty else { return }
        // One flush per client per batch, as above.
        var written: [ObjectIdentifier: any Channel] = [:]
        for (channel, line) in routed {
            channel.write(line, promise: nil)
            written[ObjectIdentifier(channel)] = channel
        }
        for channel in written.values { channel.flush() }
    }
}

/// A client of the floor: told it is ready once connected, its input read and dropped. Of the routed floor: its
/// input is the topics it wants, one a line, then `.`, and it is told it is ready once they are registered.
final class FloorClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let fanout: LoopFanout
    let routes: FloorRoutes?
    private var partial = ByteBuffer()

    init(fanout: LoopFanout, routes: FloorRoutes?) {
        self.fanout = fanout
        self.routes = routes
    }

    func channelActive(context: ChannelHandlerContext) {
        if routes == nil {
            fanout.add(context.channel)
            context.writeAndFlush(NIOAny(ByteBuffer(string: ForwarderFloor.readyLine)), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        fanout.remove(context.channel)
        routes?.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let routes else { return }
        var bytes = unwrapInboundIn(data)
        partial.writeBuffer(&bytes)
        while let newline = partial.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - partial.readerIndex
            let line = partial.readString(length: length) ?? ""
            partial.moveReaderIndex(forwardBy: 1)
            if line == "." {
                context.writeAndFlush(NIOAny(ByteBuffer(string: ForwarderFloor.readyLine)), promise: nil)
            } else if !line.isEmpty {
                routes.add(line, FloorRoutes.Client(fanout: fanout, channel: context.channel))
            }
        }
        partial.discardReadBytes()
    }
}
