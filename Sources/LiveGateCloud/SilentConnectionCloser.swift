// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NIOHTTP1

/// Closes the connection when the server asks its connections to quiesce while its first request's head is
/// still awaited (NIO's upgrade handler, which reads that head and decides, is still in the pipeline); after
/// that, Hummingbird's HTTP handlers or the WebSocket route close it in turn.
final class SilentConnectionCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent,
            (try? context.pipeline.syncOperations.context(
                handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self
            )) != nil
        {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
