// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import LiveCloudAPI
import NIOCore
import NIOHTTP1
import Synchronization

/// Answers a refused WebSocket upgrade with its reason. The WebSocket library answers every refused upgrade
/// with an empty 400, whatever the reason; the realtime route adds this handler, with its ``CloudHTTPError`` (401
/// without a valid token, 503 while refusing connections), to the connection it refuses, and the handler writes
/// that status, headers and JSON body in place of the 400. Only refused connections have it; they close after.
final class UpgradeRefusalWriter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let status: HTTPResponseStatus
    private let headers: [(String, String)]
    private let body: [UInt8]
    /// Whether the 400's head was replaced: its end then carries the body.
    private let replaced = Mutex(false)

    init(_ error: CloudHTTPError) {
        status = HTTPResponseStatus(statusCode: error.status.code)
        headers = error.headers.map { ($0.name.rawName, $0.value) }
        body = (try? StoreText.bytes(error.body)) ?? Array("{}".utf8)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status == .badRequest && !replaced.withLock({ $0 }):
            replaced.withLock { $0 = true }
            head.status = status
            head.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
            head.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
            for (name, value) in headers { head.headers.replaceOrAdd(name: name, value: value) }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers) where replaced.withLock({ $0 }):
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }
}
