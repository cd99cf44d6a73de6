// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import Hummingbird
import LiveCloudAPI
import NIOCore

/// The longest request line (method, URL, version) the cloud reads: 8 KiB, as nginx's
/// `large_client_header_buffers`. Longer is 414 `uri_too_long` (NIO's parser would count it in the head's 80 KiB
/// and answer 431, as for a header too long).
enum RequestLineLimit {
    static let bytes = 8 * 1024

    static let message = "the request's URL is over \(bytes) bytes: send long queries in a request body (POST /v1/objects/read)"
}

/// Reads a connection's first request line as it comes and answers 414, then closes, when it runs past
/// ``RequestLineLimit/bytes`` without ending; it leaves the pipeline once that line has ended, so it costs the
/// bytes of one line per connection. (A later request on the connection is checked by ``RequestLineMiddleware``.)
final class FirstRequestLineLimiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var seen = 0
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        if let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            seen += newline - buffer.readerIndex
            if seen <= RequestLineLimit.bytes {
                context.fireChannelRead(data)
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                return
            }
        } else {
            seen += buffer.readableBytes
            if seen <= RequestLineLimit.bytes {
                context.fireChannelRead(data)
                return
            }
        }
        refused = true
        var body = ByteBuffer()
        body.writeBytes((try? StoreText.bytes(ErrorResponse(code: .uriTooLong, message: RequestLineLimit.message))) ?? Array("{}".utf8))
        var response = ByteBuffer()
        response.writeString("HTTP/1.1 414 URI Too Long\r\nContent-Type: application/json\r\nContent-Length: \(body.readableBytes)\r\n")
        response.writeString("Connection: close\r\n\r\n")
        response.writeBuffer(&body)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(NIOAny(response)).whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}

/// A request line over ``RequestLineLimit/bytes`` after a connection's first: 414 (NIO's parser reads lines up to its
/// 80 KiB head limit; a longer one is its 431).
struct RequestLineMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The line as the first line's limiter counts it: method, space, target, " HTTP/1.1\r".
        guard request.method.rawValue.utf8.count + 1 + request.uri.description.utf8.count + 10 <= RequestLineLimit.bytes else {
            throw CloudHTTPError(.uriTooLong, .uriTooLong, RequestLineLimit.message)
        }
        return try await next(request, context)
    }
}
