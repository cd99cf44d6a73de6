// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import LiveCloudAPI
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// A load generator that speaks the cloud's protocols (login, object reads, the realtime WebSocket), so that a
/// benchmark of the daemon measures the daemon and not the cloud's storage. It serves one object,
/// `bench/o1`, whose data is `{"pad": "…", "t": <send time, ns>}`, and publishes new versions of it to every
/// realtime connection subscribed to its topic, at a fixed rate or as fast as it can.
///
/// It costs what the Redis publisher costs: an event is a WebSocket frame rendered before it is sent (its send
/// time stamped into it in place, right-aligned in a field of spaces: JSON whitespace), and a burst is written
/// straight to the socket, 64 frames a flush (one `writev`), on the connection's own loop.
final class LoadCloud: Sendable {
    static let collection = "bench"

    /// A realtime connection: where its frames are written, and the object ids it subscribed to (an event goes only
    /// to those of its topic: a second client of the load cloud, the forwarder floor, would otherwise load the
    /// daemon).
    private struct Connection: Sendable {
        let channel: any Channel
        let writer: NIOLoopBound<RawFrameWriter>
        var ids: Set<String> = []
    }

    /// A burst rendered for one connection: `bench/<id>`'s versions from `first` on, one message each.
    private struct PreparedBurst: Sendable {
        let connection: Connection
        let id: String
        let first: (seq: Int64, version: Int64)
        let messages: TakeOnce<[StampedMessage]>
    }

    private struct State {
        var versions: [String: Int64] = [:]
        var seq: Int64 = 0
        var connections: [Int: Connection] = [:]
        var nextConnection = 0
        /// A burst rendered ahead (``prepareBurst(_:id:)``), by connection.
        var prepared: [PreparedBurst] = []
    }

    private let state = Mutex(State())
    let padding: String

    init(payloadBytes: Int) {
        padding = String(repeating: "x", count: max(0, payloadBytes - 40))
    }

    /// The realtime event of a new version of `bench/<id>` (what ``publish(id:)`` sends), stamped with `t`.
    func eventText(id: String, version: Int64, seq: Int64, t: UInt64) -> String {
        var message = event(id: id, version: version, seq: seq)
        message.stamp(t)
        return String(buffer: message.payload)
    }

    /// The event as a message whose stamp is filled in when it is sent.
    private func event(id: String, version: Int64, seq: Int64) -> StampedMessage {
        StampedMessage(
            frame: [
                #"{"entity":{"collection":"bench","createdAt":"2026-01-01T00:00:00.000Z","data":{"pad":"\#(padding)","t":"#,
                #"},"deleted":false,"id":"\#(id)","updatedAt":"2026-01-01T00:00:00.000Z","version":\#(version)},"op":"event","seq":\#(seq),"#
                    + #""topic":"object:bench/\#(id)"}"#,
            ]
        )
    }

    /// The entity's JSON as a read answers it, with `t` = 0 (so readers can tell it from timed events).
    private func entityJSON(id: String, version: Int64) -> String {
        #"{"collection":"bench","createdAt":"2026-01-01T00:00:00.000Z","data":{"pad":"\#(padding)","t":0},"deleted":false,"#
            + #""id":"\#(id)","updatedAt":"2026-01-01T00:00:00.000Z","version":\#(version)}"#
    }

    /// Serves the cloud's HTTP API and realtime WebSocket on `port` (127.0.0.1), on `eventLoopGroup`'s loops (the
    /// benchmark gives its publishers a loop of their own, apart from the subscribers').
    func serve(port: Int, eventLoopGroup: any EventLoopGroup) async throws -> any Channel {
        try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOWebSocketServerUpgrader(
                        // A batch of subscriptions is one message, as large as livegate-cloud takes.
                        maxFrameSize: RealtimeClientBatch.maximumBytes,
                        shouldUpgrade: { channel, head in
                            channel.eventLoop.makeSucceededFuture(head.uri.hasPrefix(CloudPath.realtime) ? HTTPHeaders() : nil)
                        },
                        upgradePipelineHandler: { channel, _ in
                            channel.pipeline.removeHandler(name: CloudHTTPHandler.name).flatMapThrowing {
                                // First, next to the socket: its writes (frames made already) pass no encoder.
                                let writer = RawFrameWriter()
                                try channel.pipeline.syncOperations.addHandler(writer, position: .first)
                                try channel.pipeline.syncOperations.addHandler(
                                    RealtimeHandler(cloud: self, writer: NIOLoopBound(writer, eventLoop: channel.eventLoop))
                                )
                            }
                        }
                    )
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
                    )
                    try channel.pipeline.syncOperations.addHandler(CloudHTTPHandler(cloud: self), name: CloudHTTPHandler.name)
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
    }

    /// What the cloud answers a request: the login, an object's read, a batched read; 404 for anything else.
    fileprivate func answer(method: HTTPMethod, path: String, body: ByteBuffer) -> (HTTPResponseStatus, String) {
        if method == .POST, path == CloudPath.login {
            return (
                .ok,
                #"{"accessToken":"bench","expiresIn":86400,"refreshExpiresIn":86400,"refreshToken":"bench-refresh","tokenType":"Bearer","userId":"bench"}"#
            )
        }
        let parts = path.split(separator: "/")
        if method == .GET, parts.count == 5, parts[0] == "v1", parts[1] == "collections", parts[3] == "objects" {
            let id = String(parts[4])
            let version = state.withLock { state in
                if state.versions[id] == nil { state.versions[id] = 1 }
                return state.versions[id]!
            }
            return (.ok, entityJSON(id: id, version: version))
        }
        // The batched read (what the engine reads a new observation's object with), as of the last event.
        if method == .POST, path == CloudPath.readObjects,
            let read = try? JSONDecoder().decode(ReadObjectsRequest.self, from: Data(body.readableBytesView))
        {
            let (versions, seq) = state.withLock { state in
                let versions = read.keys.map { key -> Int64 in
                    if state.versions[key.id] == nil { state.versions[key.id] = 1 }
                    return state.versions[key.id]!
                }
                return (versions, state.seq)
            }
            let results = zip(read.keys, versions).map { key, version in
                key.collection == Self.collection
                    ? #"{"collection":"bench","entity":\#(entityJSON(id: key.id, version: version)),"id":"\#(key.id)"}"#
                    : #"{"collection":"\#(key.collection)","error":{"code":"not_found","message":"no such object"},"id":"\#(key.id)"}"#
            }
            return (.ok, #"{"results":[\#(results.joined(separator: ","))],"seq":\#(seq)}"#)
        }
        return (.notFound, #"{"error":{"code":"not_found","message":"the load cloud serves logins and object reads"}}"#)
    }

    fileprivate func connected(_ channel: any Channel, writer: NIOLoopBound<RawFrameWriter>) -> Int {
        state.withLock { state in
            state.nextConnection += 1
            state.connections[state.nextConnection] = Connection(channel: channel, writer: writer)
            return state.nextConnection
        }
    }

    fileprivate func disconnected(_ id: Int) { _ = state.withLock { $0.connections.removeValue(forKey: id) } }

    /// The answer to a subscription or unsubscription on connection `connection`. No log to replay from: a
    /// subscription from the last event resumes with nothing to replay, one from before it is told to resync.
    fileprivate func ack(_ request: RealtimeClientMessage, on connection: Int) -> String {
        let seq = state.withLock { state in
            if case .object(let key) = request.topic, key.collection == Self.collection {
                switch request.op {
                case .subscribe: state.connections[connection]?.ids.insert(key.id)
                case .unsubscribe: state.connections[connection]?.ids.remove(key.id)
                }
            }
            return state.seq
        }
        guard request.op == .subscribe else { return #"{"op":"ack","ref":\#(request.ref)}"# }
        switch request.since {
        case nil: return #"{"op":"ack","ref":\#(request.ref),"seq":\#(seq)}"#
        case seq?: return #"{"op":"ack","ref":\#(request.ref),"replayed":0,"seq":\#(seq)}"#
        default: return #"{"op":"ack","ref":\#(request.ref),"resync":true,"seq":\#(seq)}"#
        }
    }

    /// How many realtime connections are subscribed to `bench/<id>`.
    func subscriptions(of id: String) -> Int {
        state.withLock { $0.connections.values.filter { $0.ids.contains(id) }.count }
    }

    /// How many of `ids` some realtime connection is subscribed to.
    func subscribedCount(of ids: [String]) -> Int {
        state.withLock { state in ids.count { id in state.connections.values.contains { $0.ids.contains(id) } } }
    }

    /// Publishes one new version of `bench/<id>`, stamped with the time now (written and flushed on each subscribed
    /// connection's loop); returns the stamp.
    @discardableResult
    func publish(id: String = "o1") -> UInt64 {
        let t = DispatchTime.now().uptimeNanoseconds
        var targets = state.withLock { state -> [(Connection, StampedMessage)] in
            state.seq += 1
            let version = (state.versions[id] ?? 1) + 1
            state.versions[id] = version
            let targets = state.connections.values.filter { $0.ids.contains(id) }
            return targets.map { ($0, event(id: id, version: version, seq: state.seq)) }
        }
        for index in targets.indices {
            targets[index].1.stamp(t)  // in place: the array holds the only reference to the message's bytes
            let (connection, frame) = (targets[index].0, targets[index].1.bytes)
            connection.channel.eventLoop.execute { connection.writer.value.write(CollectionOfOne(frame)) }
        }
        return t
    }

    /// Renders the next `count` versions of `bench/<id>` for every subscribed connection, to be sent by
    /// ``publishPrepared()`` (their stamps filled in then, and the versions published as they are written).
    func prepareBurst(_ count: Int, id: String = "o1") {
        state.withLock { state in
            let first = (seq: state.seq + 1, version: (state.versions[id] ?? 1) + 1)
            let messages = { (0..<Int64(count)).map { self.event(id: id, version: first.version + $0, seq: first.seq + $0) } }
            state.prepared = state.connections.values.filter { $0.ids.contains(id) }.map { connection in
                PreparedBurst(connection: connection, id: id, first: first, messages: TakeOnce(messages()))
            }
        }
    }

    /// Sends the burst ``prepareBurst(_:id:)`` rendered, as fast as each connection's loop writes: 64 frames a flush,
    /// each stamped as its flush's frames are written. Reads and subscriptions answered meanwhile see the versions
    /// written so far.
    func publishPrepared() async throws {
        let prepared = state.withLock { state in
            defer { state.prepared = [] }
            return state.prepared
        }
        for burst in prepared {
            try await burst.connection.channel.eventLoop.submit {
                // The only reference to each message's bytes: stamped in place, not copied.
                var messages = burst.messages.take() ?? []
                var frames: [ByteBuffer] = []
                frames.reserveCapacity(64)
                for start in stride(from: 0, to: messages.count, by: 64) {
                    let t = DispatchTime.now().uptimeNanoseconds
                    frames.removeAll(keepingCapacity: true)
                    let end = min(start + 64, messages.count)
                    for index in start..<end {
                        messages[index].stamp(t)
                        frames.append(messages[index].bytes)
                    }
                    self.state.withLock { state in
                        state.seq = max(state.seq, burst.first.seq + Int64(end - 1))
                        state.versions[burst.id] = max(state.versions[burst.id] ?? 1, burst.first.version + Int64(end - 1))
                    }
                    burst.connection.writer.value.write(frames)
                }
            }.get()
        }
    }

    /// The payload a Redis publisher sends for the same update (the same bytes the daemon's clients see as data),
    /// around its stamp.
    var redisPayload: (head: String, tail: String) { (#"{"pad":"\#(padding)","t":"#, "}") }
}

/// A value handed over once, to be the only holder of what it refers to (a burst's messages, stamped in place
/// only while nothing else refers to their bytes).
final class TakeOnce<Value: Sendable>: Sendable {
    private let value: Mutex<Value?>

    init(_ value: Value) { self.value = Mutex(value) }

    func take() -> Value? {
        value.withLock { value in
            defer { value = nil }
            return value
        }
    }
}

/// A message rendered before it is sent, its send stamp filled in when it goes: its bytes hold a field of 20 spaces
/// for the stamp between each two of its parts, and a WebSocket text frame's header before them when it is a frame.
struct StampedMessage: Sendable {
    private(set) var bytes: ByteBuffer
    /// Where the stamp's fields are in `bytes`.
    private let fields: [Int]
    /// Where the message is in `bytes` (after a frame's header).
    private let start: Int
    static let fieldWidth = 20

    /// `parts` with a stamp's field between each two, as they are (a Redis command), or in a WebSocket text frame
    /// (a server's: unmasked).
    init(_ parts: [String], frame: Bool = false) {
        let length = parts.reduce(0) { $0 + $1.utf8.count } + Self.fieldWidth * (parts.count - 1)
        var bytes = ByteBuffer()
        bytes.reserveCapacity(length + 10)
        if frame {
            bytes.writeInteger(UInt8(0x81))  // FIN, text
            if length < 126 {
                bytes.writeInteger(UInt8(length))
            } else if length <= Int(UInt16.max) {
                bytes.writeInteger(UInt8(126))
                bytes.writeInteger(UInt16(length))
            } else {
                bytes.writeInteger(UInt8(127))
                bytes.writeInteger(UInt64(length))
            }
        }
        start = bytes.readableBytes
        var fields: [Int] = []
        for (index, part) in parts.enumerated() {
            if index > 0 {
                fields.append(bytes.readableBytes)
                bytes.writeRepeatingByte(UInt8(ascii: " "), count: Self.fieldWidth)
            }
            bytes.writeString(part)
        }
        self.bytes = bytes
        self.fields = fields
    }

    init(frame parts: [String]) { self.init(parts, frame: true) }

    /// The message without a frame's header.
    var payload: ByteBuffer { bytes.getSlice(at: bytes.readerIndex + start, length: bytes.readableBytes - start) ?? ByteBuffer() }

    /// Fills the stamp's fields with `t`, right-aligned (leading spaces are JSON whitespace).
    mutating func stamp(_ t: UInt64) {
        let fields = self.fields
        bytes.withUnsafeMutableReadableBytes { pointer in
            for at in fields {
                var value = t
                var index = at + Self.fieldWidth - 1
                repeat {
                    pointer[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                    index -= 1
                } while value > 0 && index >= at
                while index >= at {
                    pointer[index] = UInt8(ascii: " ")
                    index -= 1
                }
            }
        }
    }
}

/// Writes frames made already, next to the socket (it is the pipeline's first handler): one flush for all of them.
final class RawFrameWriter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// On the channel's loop.
    func write(_ frames: some Sequence<ByteBuffer>) {
        guard let context else { return }
        for frame in frames { context.write(wrapOutboundOut(frame), promise: nil) }
        context.flush()
    }
}

/// The load cloud's HTTP answers (before a connection upgrades to the realtime WebSocket).
private final class CloudHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    static let name = "load-cloud-http"

    private let cloud: LoadCloud
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(cloud: LoadCloud) { self.cloud = cloud }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
            let (status, text) = cloud.answer(method: head.method, path: path, body: body)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(text.utf8.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
            let keepAlive = head.isKeepAlive
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { channel.close(promise: nil) }
            }
            self.head = nil
        }
    }
}

/// A realtime connection's requests (subscriptions, pings, the close), answered on its loop.
private final class RealtimeHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let cloud: LoadCloud
    private let writer: NIOLoopBound<RawFrameWriter>
    private var id = 0
    private var message = ByteBuffer()

    init(cloud: LoadCloud, writer: NIOLoopBound<RawFrameWriter>) {
        self.cloud = cloud
        self.writer = writer
    }

    func handlerAdded(context: ChannelHandlerContext) { id = cloud.connected(context.channel, writer: writer) }
    func handlerRemoved(context: ChannelHandlerContext) { cloud.disconnected(id) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .continuation:
            var data = frame.unmaskedData
            message.writeBuffer(&data)
            guard frame.fin else { return }
            defer { message.clear() }
            guard let request = try? JSONDecoder().decode(RealtimeClientFrame.self, from: Data(message.readableBytesView)) else { return }
            let requests =
                switch request {
                case .single(let request): [request]
                case .batch(let requests): requests
                }
            for request in requests {
                let ack = ByteBuffer(string: cloud.ack(request, on: id))
                context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ack)), promise: nil)
            }
            context.flush()
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: ByteBuffer()))).whenComplete { _ in
                channel.close(promise: nil)
            }
        default:
            break
        }
    }
}
