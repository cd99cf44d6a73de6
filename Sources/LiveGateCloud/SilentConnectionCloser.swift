// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NIOHTTP1

/// Closes the connection while its first request's head is still awaited (NIO's upgrade handler, which reads that
/// head and decides, is still in the pipeline): when the server asks its connections to quiesce, and when the head
/// has not come in whole within `headTimeout` (a connection that says nothing, a client stalled in its head).
/// After that head, Hummingbird's HTTP handlers (their idle timeout among them) or the WebSocket route own the
/// connection.
final class SilentConnectionCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let headTimeout: TimeAmount?
    private var timer: Scheduled<Void>?

    init(headTimeout: TimeAmount? = nil) {
        self.headTimeout = headTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startTimer(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startTimer(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, Self.awaitsFirstHead(context) {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func startTimer(_ context: ChannelHandlerContext) {
        guard let headTimeout, timer == nil else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: headTimeout) {
            let context = loopBound.value
            if Self.awaitsFirstHead(context) { context.close(promise: nil) }
        }
    }

    private static func awaitsFirstHead(_ context: ChannelHandlerContext) -> Bool {
        (try? context.pipeline.syncOperations.context(
            handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self
        )) != nil
    }
}
