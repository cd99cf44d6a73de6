// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import LiveCloudAPI
import NIOCore
import NIOHTTP1
import Synchronization

/// Answers a refused WebSocket upgrade with its reason. The WebSocket library answers every refused upgrade
/// with an empty 400, whatever the reason; the realtime route records its ``CloudHTTPError`` here (401 without a
/// valid token, 503 while refusing connections) before refusing, and this handler, which sees that 400 go out,
/// writes the recorded status, headers and JSON body instead. Any other answer passes unchanged. The route
/// removes it from a connection it upgrades (its frames are not HTTP).
final class UpgradeRefusalWriter: ChannelOutboundHandler, RemovableChannelHandler, Sendable {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private struct Refusal {
        var status: HTTPResponseStatus
        var headers: [(String, String)]
        var body: [UInt8]
    }

    private struct State {
        /// Recorded by the route; taken by the 400 it replaces.
        var recorded: Refusal?
        /// The body of the refusal whose head went out, written before its end.
        var body: [UInt8]?
    }

    private let state = Mutex(State())

    /// The refusal to answer with, recorded by the route before it refuses the upgrade.
    func record(_ error: CloudHTTPError) {
        let body = (try? StoreText.bytes(error.body)) ?? Array("{}".utf8)
        let headers = error.headers.map { ($0.name.rawName, $0.value) }
        state.withLock { $0.recorded = Refusal(status: HTTPResponseStatus(statusCode: error.status.code), headers: headers, body: body) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status == .badRequest:
            guard
                let refusal = state.withLock({ state -> Refusal? in
                    defer { state.recorded = nil }
                    state.body = state.recorded?.body
                    return state.recorded
                })
            else { return context.write(data, promise: promise) }
            head.status = refusal.status
            head.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
            head.headers.replaceOrAdd(name: "Content-Length", value: String(refusal.body.count))
            for (name, value) in refusal.headers { head.headers.replaceOrAdd(name: name, value: value) }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers):
            if let body = state.withLock({ state -> [UInt8]? in
                defer { state.body = nil }
                return state.body
            }) {
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
            }
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }
}
