// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The cloud's request context: Hummingbird's WebSocket context, and the connection it came on (for the
/// peer's address, and for answering a refused WebSocket upgrade with its reason: ``UpgradeRefusalWriter``).
struct CloudRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }

    var remoteAddress: SocketAddress? { channel.remoteAddress }

    /// The peer's address without its port (a client's connections share it), for per-address limits.
    var peerAddress: String? { channel.remoteAddress?.ipAddress }
}
