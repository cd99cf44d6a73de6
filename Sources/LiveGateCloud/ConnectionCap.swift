// Licensed under the Apache License, Version 2.0.

import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// How many connections the cloud holds at once, and which gives way when one more comes: the one idle longest
/// (no request since its last answer, or none ever), never a realtime WebSocket or a connection whose request is
/// still being answered. With none to close, the new connection is answered 503 and closed
/// (``ConnectionCapHandler``).
///
/// So thousands of idle or silent connections (clients that keep spares, a scan, a flood of connections that say
/// nothing) never keep a new request out: nginx does the same with its keep-alive connections when
/// `worker_connections` runs out. The default limit stays below the descriptor limit, so `accept` never fails for
/// want of one. Not a defence against a client that keeps as many requests under way as the limit (heads sent a
/// byte at a time): those count as busy while bytes keep coming within the idle timeout, and new connections
/// meanwhile get 503.
package final class ConnectionCap: Sendable {
    /// A connection as the cap sees it.
    private struct Entry {
        let channel: any Channel
        /// When it last sent bytes (or connected).
        var lastRead: NIODeadline
        /// Whether everything it sent has been answered since (bytes written after its last read).
        var answered: Bool
        /// A realtime WebSocket: never closed to make room.
        var realtime = false
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var closedForRoom = 0
        var refused = 0
        /// When the cap last said in the log that it was full, and the counts it said then.
        var lastReport: NIODeadline?
        var reported = (closedForRoom: 0, refused: 0)
    }

    package let limit: Int
    private let state = Mutex(State())
    /// Where the cap says, at most once a minute, that it was full (`nil`: nowhere).
    private let logger: Logger?

    package init(limit: Int, logger: Logger? = nil) {
        self.limit = max(1, limit)
        self.logger = logger
    }

    /// What became of a new connection.
    package enum Admission: Equatable {
        case admitted
        /// Admitted; the connection idle longest was closed to make room.
        case admittedInPlaceOfIdle
        /// Over the limit, with no idle connection to close: answer 503 and close it.
        case refused
    }

    /// A new connection, at `now`.
    package func admit(_ channel: any Channel, now: NIODeadline = .now()) -> Admission {
        let (admission, victim, report) = state.withLock { state -> (Admission, (any Channel)?, (closed: Int, refused: Int)?) in
            guard state.entries.count >= limit else {
                state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, lastRead: now, answered: true)
                return (.admitted, nil, nil)
            }
            let idle = state.entries.lazy.filter { !$0.value.realtime && $0.value.answered }.min { $0.value.lastRead < $1.value.lastRead }
            if let idle {
                state.entries[idle.key] = nil
                state.closedForRoom += 1
                state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, lastRead: now, answered: true)
            } else {
                state.refused += 1
            }
            // Full: said in the log at most once a minute, with what was done since it was last said.
            var report: (closed: Int, refused: Int)?
            if state.lastReport.map({ now - $0 >= .minutes(1) }) ?? true {
                report = (state.closedForRoom - state.reported.closedForRoom, state.refused - state.reported.refused)
                state.lastReport = now
                state.reported = (state.closedForRoom, state.refused)
            }
            return idle.map { (.admittedInPlaceOfIdle, $0.value.channel, report) } ?? (.refused, nil, report)
        }
        victim?.close(promise: nil)
        if let report {
            logger?.warning(
                "connections at the limit: the idle longest are closed to make room, new ones refused when every one is busy",
                metadata: [
                    "maxConnections": "\(limit)", "closedForRoomSinceLastSaid": "\(report.closed)",
                    "refusedSinceLastSaid": "\(report.refused)",
                ]
            )
        }
        return admission
    }

    /// The connection sent bytes: a request is under way until something is written back.
    package func read(_ channel: any Channel, now: NIODeadline = .now()) {
        state.withLock { state in
            let id = ObjectIdentifier(channel)
            state.entries[id]?.lastRead = now
            state.entries[id]?.answered = false
        }
    }

    /// Bytes were written to the connection: what it sent is answered (a pipelined request after it is read again).
    package func wrote(_ channel: any Channel) {
        state.withLock { state in
            let id = ObjectIdentifier(channel)
            if state.entries[id]?.answered == false { state.entries[id]?.answered = true }
        }
    }

    /// The connection is now a realtime WebSocket: it stays, whatever comes.
    package func markRealtime(_ channel: any Channel) {
        state.withLock { $0.entries[ObjectIdentifier(channel)]?.realtime = true }
    }

    package func closed(_ channel: any Channel) {
        _ = state.withLock { $0.entries.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Connections held now, closed to make room and refused since start.
    package var counts: (open: Int, closedForRoom: Int, refused: Int) {
        state.withLock { ($0.entries.count, $0.closedForRoom, $0.refused) }
    }

    /// The default limit: the descriptor limit (`RLIMIT_NOFILE`, soft) less 256 for the database, its journal and
    /// the server's own files, and at least 64.
    package static func defaultLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return 16_384 }
        return max(64, Int(clamping: limit.rlim_cur) - 256)
    }

    /// Raises the soft descriptor limit to the hard one (systemd gives services 1024 soft, 524288 hard: the soft
    /// limit is for programs that use `select`, which NIO does not). Returns the soft limit now in force.
    @discardableResult
    package static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }
}

/// First in every connection's pipeline: tells the ``ConnectionCap`` of the connection's arrival, reads, writes
/// and end, and answers a connection the cap refuses with 503 before closing it.
final class ConnectionCapHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let cap: ConnectionCap
    private enum Standing { case unknown, admitted, refused }
    private var standing = Standing.unknown
    /// Whether bytes were read since the last write: only then does a write tell the cap (a WebSocket's stream of
    /// frames takes its lock once per message it reads, not once per frame it sends).
    private var readSinceWrite = false

    init(cap: ConnectionCap) {
        self.cap = cap
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        if standing == .admitted { context.fireChannelActive() }
    }

    /// Asks the cap once, when the connection is first seen active (or first reads).
    private func admit(_ context: ChannelHandlerContext) {
        guard standing == .unknown else { return }
        switch cap.admit(context.channel) {
        case .admitted, .admittedInPlaceOfIdle:
            standing = .admitted
        case .refused:
            standing = .refused
            let body = #"{"error":{"code":"unavailable","message":"the server holds as many connections as it may, all busy: retry shortly"}}"#
            var response = context.channel.allocator.buffer(capacity: 256)
            response.writeString(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                    + "Retry-After: 1\r\nConnection: close\r\n\r\n\(body)"
            )
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        admit(context)
        guard standing == .admitted else { return }  // refused: its answer is on the way, and it closes
        cap.read(context.channel)
        readSinceWrite = true
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if readSinceWrite, standing == .admitted {
            readSinceWrite = false
            cap.wrote(context.channel)
        }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if standing == .admitted { cap.closed(context.channel) }
        standing = .refused  // counted no more
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if standing == .admitted { cap.closed(context.channel) }
    }
}
