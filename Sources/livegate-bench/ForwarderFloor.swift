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
enum ForwarderFloor {
    /// What a client reads first, once connected: the line the benchmark's subscribers wait for.
    static let readyLine = #"{"floor":"ready"}"# + "\n"
    static let readyMarker = #""floor":"ready""#

    /// Subscribes to `topic`, then serves until the process is ended (the benchmark's SIGTERM); its socket
    /// listens once the subscription is acknowledged. `clientLoops`: the daemon's default, one fewer than the
    /// cores, at least one.
    static func serve(cloudURL: String, topic: Topic, socketPath: String, clientLoops: Int) async throws {
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
                        try await forward(from: cloudURL, topic: topic, on: loop, to: fanouts, subscribed: subscribed)
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
                        try channel.pipeline.syncOperations.addHandler(FloorClientHandler(fanout: fanout))
                    }
                }
                .bind(unixDomainSocketPath: socketPath, cleanupExistingSocketFile: true).get()
            defer { server.close(promise: nil) }
            try await group.next()
        }
    }

    /// Reads the realtime WebSocket on `loop`: the first message must be the subscription's ack, every later
    /// text frame goes to every client.
    private static func forward(
        from cloudURL: String,
        topic: Topic,
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
            let subscribe = RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic)
            try await outbound.write(.text(String(decoding: try JSONEncoder().encode(subscribe), as: UTF8.self)))
            var frames = inbound.makeAsyncIterator()
            var acknowledged = false
            while let frame = try await frames.next() {
                guard frame.opcode == .text, frame.fin else { continue }
                guard acknowledged else {
                    let answer = try CloudJSON.decodeRealtimeMessage(from: String(buffer: frame.data))
                    guard answer.op == .ack, answer.ref == subscribe.ref else {
                        throw BenchError("the load cloud did not acknowledge the floor's subscription: \(answer)")
                    }
                    acknowledged = true
                    subscribed.succeed()
                    continue
                }
                // One copy, as the daemon's notification body is one: the frame's bytes and a newline.
                var line = ByteBuffer()
                line.reserveCapacity(frame.data.readableBytes + 1)
                line.writeImmutableBuffer(frame.data)
                line.writeInteger(UInt8(ascii: "\n"))
                for fanout in fanouts { fanout.offer(line) }
            }
        }
    }
}

/// One client event loop's clients, and the lines offered to them since its last batch (written on the loop).
final class LoopFanout: Sendable {
    private struct State {
        var clients: [ObjectIdentifier: any Channel] = [:]
        var pending: [ByteBuffer] = []
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

    private func writeBatch() {
        let (lines, clients) = state.withLock { state -> ([ByteBuffer], Dictionary<ObjectIdentifier, any Channel>.Values) in
            var lines: [ByteBuffer] = []
            swap(&lines, &state.pending)
            state.scheduled = false
            return (lines, state.clients.values)
        }
        for client in clients {
            for line in lines { client.write(line, promise: nil) }
            client.flush()
        }
    }
}

/// A client of the floor: told it is ready once connected, its input read and dropped.
final class FloorClientHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let fanout: LoopFanout

    init(fanout: LoopFanout) { self.fanout = fanout }

    func channelActive(context: ChannelHandlerContext) {
        fanout.add(context.channel)
        context.writeAndFlush(NIOAny(ByteBuffer(string: ForwarderFloor.readyLine)), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        fanout.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
