// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle

/// Hummingbird's HTTP/1 server with WebSocket upgrade, whose connections are closed on shutdown while their
/// first request's head has not come in whole, and hear the graceful shutdown as their ``ConnectionShutdown``
/// only (see ``handle(value:logger:)``).
///
/// Hummingbird's graceful shutdown reaches a connection only once its first request's head is read, so a
/// connection on which a client said nothing, or not all of a head (a TCP health check, a client's spare
/// connection, a stalled peer), kept the cloud from stopping on SIGTERM until the service manager killed
/// it. ``SilentConnectionCloser`` sits first in each connection's pipeline.
struct CloudChildChannel: ServerChildChannel {
    let base: HTTP1WebSocketUpgradeChannel
    /// How long a connection may take to send its first request's head (the idle timeout: Hummingbird's applies
    /// from that head on only).
    let headTimeout: TimeAmount?
    /// How many connections are held at once, and which gives way (``ConnectionCapHandler``, first of all).
    let cap: ConnectionCap

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1WebSocketUpgradeChannel.Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(SilentConnectionCloser(headTimeout: headTimeout), position: .first)
            try channel.pipeline.syncOperations.addHandler(FirstRequestLineLimiter(), position: .first)
            try channel.pipeline.syncOperations.addHandler(ConnectionCapHandler(cap: cap), position: .first)
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            try channel.pipeline.syncOperations.addHandler(MalformedRequestAnswerer())
            return value
        }
    }

    /// Handles the connection in a detached task: it does not inherit ServiceLifecycle's graceful shutdown, which
    /// this task forwards as the connection's ``ConnectionShutdown`` (see there why), and its cancellation.
    /// (Hummingbird's HTTP/1 handling does not use the graceful shutdown handlers; it closes idle connections
    /// on the quiesce event.)
    func handle(value: HTTP1WebSocketUpgradeChannel.Value, logger: Logger) async {
        let shutdown = ConnectionShutdown()
        await withGracefulShutdownHandler {
            let handling = Task.detached {
                await ConnectionShutdown.$current.withValue(shutdown) { await base.handle(value: value, logger: logger) }
            }
            await withTaskCancellationHandler {
                await handling.value
            } onCancel: {
                handling.cancel()
            }
        } onGracefulShutdown: {
            shutdown.trigger()
        }
    }
}

extension HTTPServerBuilder {
    /// `.http1WebSocketUpgrade(webSocketRouter:configuration:)` with ``CloudChildChannel``'s connections.
    static func cloudHTTP1WebSocketUpgrade<WSResponderBuilder: HTTPResponderBuilder & _HB_SendableMetatype>(
        webSocketRouter: WSResponderBuilder,
        configuration: HTTP1WebSocketUpgradeChannel.Configuration,
        cap: ConnectionCap,
        warmUpLogger: Logger
    ) -> HTTPServerBuilder where WSResponderBuilder.Responder.Context: WebSocketRequestContext {
        let webSocketResponder = webSocketRouter.buildResponder()
        return .init { responder in
            // Before the server binds: see ConnectionWarmUp.
            if case .failed(let reason) = ConnectionWarmUp.run(configuration: configuration, logger: warmUpLogger) {
                warmUpLogger.warning("could not set up a connection ahead of the first one: \(reason)")
            }
            return CloudChildChannel(
                base: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: configuration),
                headTimeout: configuration.http1.idleTimeout,
                cap: cap
            )
        }
    }
}
