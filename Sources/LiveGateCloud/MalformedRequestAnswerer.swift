// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import NIOCore
import NIOHTTP1

/// Answers a request NIO's HTTP parser refused, then closes the connection: 501 for a method name HTTP does not
/// define, 431 for a head over the parser's limit of 80 KiB (headers too long; a URL too long is answered 414
/// before, by ``FirstRequestLineLimiter``), 400 for anything else malformed (a control character in a header, a raw
/// byte the request line may not hold). Without it such a connection got no answer and stayed open (the parser's
/// error reached no handler that answers).
///
/// It sits last in the connection's pipeline when it is set up; the answer is written through
/// ``SilentConnectionCloser``, first in the pipeline, so it goes to the socket as it is, past the HTTP encoder.
final class MalformedRequestAnswerer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var answered = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        guard !answered else { return }
        answered = true
        let (status, message) = Self.answer(to: parserError)
        var body = ByteBuffer()
        body.writeBytes((try? StoreText.bytes(ErrorResponse(code: .badRequest, message: message))) ?? Array("{}".utf8))
        var response = ByteBuffer()
        response.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
        response.writeString("Content-Type: application/json\r\nContent-Length: \(body.readableBytes)\r\nConnection: close\r\n\r\n")
        response.writeBuffer(&body)
        let first = (try? context.pipeline.syncOperations.context(handlerType: SilentConnectionCloser.self)) ?? context
        first.writeAndFlush(NIOAny(response)).whenComplete { _ in context.close(promise: nil) }
    }

    static func answer(to error: HTTPParserError) -> (HTTPResponseStatus, String) {
        switch error {
        case .invalidMethod:
            return (.notImplemented, "unknown request method: livegate-cloud answers GET, HEAD, OPTIONS, POST, PUT, PATCH and DELETE")
        case .headerOverflow:
            return (.requestHeaderFieldsTooLarge, "the request's headers are over the server's limit")
        default:
            return (.badRequest, "malformed HTTP request (\(error)); see Protocol/cloud")
        }
    }
}
