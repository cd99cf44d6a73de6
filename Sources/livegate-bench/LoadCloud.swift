// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import Logging
import NIOCore
import Synchronization

/// A load generator that speaks the cloud's protocols (login, object reads, the realtime WebSocket), so that a
/// benchmark of the daemon measures the daemon and not the cloud's storage. It serves one object,
/// `bench/o1`, whose data is `{"pad": "…", "t": <send time, ns>}`, and publishes new versions of it to every
/// realtime connection subscribed to its topic, at a fixed rate or as fast as it can.
final class LoadCloud: Sendable {
    static let collection = "bench"

    private struct State {
        var versions: [String: Int64] = [:]
        var seq: Int64 = 0
        /// The realtime connections, each with the object ids it subscribed to: an event goes only to those of
        /// its topic (a second client of the load cloud, the forwarder floor, would otherwise load the daemon).
        var subscribers: [Int: (sink: AsyncStream<String>.Continuation, ids: Set<String>)] = [:]
        var nextSubscriber = 0
    }

    private let state = Mutex(State())
    let padding: String

    init(payloadBytes: Int) {
        padding = String(repeating: "x", count: max(0, payloadBytes - 40))
    }

    /// The realtime event of a new version of `bench/<id>` (what ``publish(id:)`` sends).
    func eventText(id: String, version: Int64, seq: Int64, t: UInt64) -> String {
        #"{"entity":\#(entityJSON(id: id, version: version, t: t)),"op":"event","seq":\#(seq),"topic":"object:bench/\#(id)"}"#
    }

    /// The entity's JSON, with `t` = 0 for reads (so readers can tell them from timed events).
    private func entityJSON(id: String, version: Int64, t: UInt64) -> String {
        #"{"collection":"bench","createdAt":"2026-01-01T00:00:00.000Z","data":{"pad":"\#(padding)","t":\#(t)},"deleted":false,"#
            + #""id":"\#(id)","updatedAt":"2026-01-01T00:00:00.000Z","version":\#(version)}"#
    }

    /// - Parameter eventLoopGroup: where the server's sockets are served (the benchmark gives its publishers a
    ///   loop of their own, apart from the subscribers').
    func application(port: Int, eventLoopGroup: any EventLoopGroup) -> some ApplicationProtocol {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.post(RouterPath(CloudPath.login)) { _, _ -> Response in
            let login =
                #"{"accessToken":"bench","expiresIn":86400,"refreshExpiresIn":86400,"refreshToken":"bench-refresh","tokenType":"Bearer","userId":"bench"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: login)))
        }
        router.get("/v1/collections/:collection/objects/:id") { _, context -> Response in
            let id = try context.parameters.require("id")
            let version = self.state.withLock { state in
                if state.versions[id] == nil { state.versions[id] = 1 }
                return state.versions[id]!
            }
            let body = ByteBuffer(string: self.entityJSON(id: id, version: version, t: 0))
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: body))
        }
        // The batched read (what the engine reads a new observation's object with), as of the last event.
        router.post(RouterPath(CloudPath.readObjects)) { request, _ -> Response in
            let read = try JSONDecoder().decode(ReadObjectsRequest.self, from: Data(try await request.body.collect(upTo: 1 << 20).readableBytesView))
            let (versions, seq) = self.state.withLock { state in
                let versions = read.keys.map { key -> Int64 in
                    if state.versions[key.id] == nil { state.versions[key.id] = 1 }
                    return state.versions[key.id]!
                }
                return (versions, state.seq)
            }
            let results = zip(read.keys, versions).map { key, version in
                key.collection == Self.collection
                    ? #"{"collection":"bench","entity":\#(self.entityJSON(id: key.id, version: version, t: 0)),"id":"\#(key.id)"}"#
                    : #"{"collection":"\#(key.collection)","error":{"code":"not_found","message":"no such object"},"id":"\#(key.id)"}"#
            }
            let body = ByteBuffer(string: #"{"results":[\#(results.joined(separator: ","))],"seq":\#(seq)}"#)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: body))
        }
        router.ws(RouterPath(CloudPath.realtime)) { _, _ in
            .upgrade([:])
        } onUpgrade: { inbound, outbound, _ in
            let (messages, sink) = AsyncStream.makeStream(of: String.self)
            let id = self.state.withLock { state in
                state.nextSubscriber += 1
                state.subscribers[state.nextSubscriber] = (sink, [])
                return state.nextSubscriber
            }
            defer { _ = self.state.withLock { $0.subscribers.removeValue(forKey: id) } }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { for await text in messages { try await outbound.write(.text(text)) } }
                for try await message in inbound.messages(maxSize: RealtimeClientBatch.maximumBytes) {
                    guard case .text(let text) = message,
                        let frame = try? JSONDecoder().decode(RealtimeClientFrame.self, from: Data(text.utf8))
                    else { continue }
                    let requests =
                        switch frame {
                        case .single(let request): [request]
                        case .batch(let requests): requests
                        }
                    for request in requests {
                        let seq = self.state.withLock { state in
                            if case .object(let key) = request.topic, key.collection == Self.collection {
                                switch request.op {
                                case .subscribe: state.subscribers[id]?.ids.insert(key.id)
                                case .unsubscribe: state.subscribers[id]?.ids.remove(key.id)
                                }
                            }
                            return state.seq
                        }
                        guard request.op == .subscribe else {
                            sink.yield(#"{"op":"ack","ref":\#(request.ref)}"#)
                            continue
                        }
                        // No log to replay from: a subscription from the last event resumes with nothing to replay,
                        // one from before it is told to resync.
                        switch request.since {
                        case nil: sink.yield(#"{"op":"ack","ref":\#(request.ref),"seq":\#(seq)}"#)
                        case seq?: sink.yield(#"{"op":"ack","ref":\#(request.ref),"replayed":0,"seq":\#(seq)}"#)
                        default: sink.yield(#"{"op":"ack","ref":\#(request.ref),"resync":true,"seq":\#(seq)}"#)
                        }
                    }
                }
                sink.finish()
                group.cancelAll()
            }
        }
        return Application(
            router: router,
            // A batch of subscriptions is one message, as large as livegate-cloud takes (the default, 16 KiB, closed
            // the connection at the first batch of a few hundred topics).
            server: .http1WebSocketUpgrade(
                webSocketRouter: router,
                configuration: .init(ws: .init(maxFrameSize: RealtimeClientBatch.maximumBytes))
            ),
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: Logger(label: "bench-cloud", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    /// How many realtime connections are subscribed to `bench/<id>`.
    func subscriptions(of id: String) -> Int {
        state.withLock { $0.subscribers.values.filter { $0.ids.contains(id) }.count }
    }

    /// How many of `ids` some realtime connection is subscribed to.
    func subscribedCount(of ids: [String]) -> Int {
        state.withLock { state in ids.count { id in state.subscribers.values.contains { $0.ids.contains(id) } } }
    }

    /// Publishes one new version of `bench/<id>`, stamped with the time now; returns the stamp.
    @discardableResult
    func publish(id: String = "o1") -> UInt64 {
        let t = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            state.seq += 1
            let version = (state.versions[id] ?? 1) + 1
            state.versions[id] = version
            let text = eventText(id: id, version: version, seq: state.seq, t: t)
            for subscriber in state.subscribers.values where subscriber.ids.contains(id) { subscriber.sink.yield(text) }
        }
        return t
    }

    /// The payload a Redis publisher sends for the same update (the same bytes the daemon's clients see as data).
    func redisPayload() -> String {
        #"{"pad":"\#(padding)","t":\#(DispatchTime.now().uptimeNanoseconds)}"#
    }
}
