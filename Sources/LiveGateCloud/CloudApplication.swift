// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import Logging
import NIOCore
import Synchronization

/// Builds the reference cloud: REST + WebSocket realtime over one SQLite file.
///
/// ```swift
/// let app = try buildCloudApplication(configuration, logger: logger) { port in print("listening on \(port)") }
/// try await app.runService()
/// ```
/// - Parameter onListening: called with the bound port once the server accepts connections.
public func buildCloudApplication(
    _ configuration: CloudConfiguration,
    logger: Logger,
    onListening: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let hubBox = HubBox()
    let store = try EntityStore(path: configuration.databasePath, eventRetention: configuration.eventRetention) { seq, event in
        hubBox.hub?.publish(seq: seq, event: event)
    }
    let hub = RealtimeHub(lastPublished: try store.lastSeq())
    try store.createStreams(configuration.streams)
    hubBox.hub = hub
    let auth = AuthService(
        users: configuration.users,
        tokenLifetime: configuration.tokenLifetime,
        refreshLifetime: configuration.refreshLifetime,
        bcryptCost: configuration.bcryptCost
    )
    let router = Router(context: BasicWebSocketRequestContext.self)
    let faults = configuration.faultInjection ? FaultInjector() : nil
    if let faults {
        router.middlewares.add(FaultMiddleware(faults: faults))
        FaultRoutes(faults: faults, hub: hub, auth: auth).register(on: router)
        logger.warning("fault injection is on: /v1/admin/faults can fail this server on purpose")
    }
    ObjectRoutes(auth: auth, permissions: configuration.permissions, store: store, hub: hub, maxBodyBytes: configuration.maxBodyBytes).register(
        on: router
    )
    StreamRoutes(auth: auth, admins: configuration.admins, store: store, messageLimit: configuration.streamMessageLimit).register(on: router)
    RealtimeRoute(auth: auth, permissions: configuration.permissions, hub: hub, store: store, faults: faults).register(on: router)
    return Application(
        router: router,
        server: .http1WebSocketUpgrade(webSocketRouter: router),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "livegate-cloud"),
        onServerRunning: { channel in await onListening(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}

/// The hub, set once it exists: the store needs a publisher before the hub can learn the store's last seq.
private final class HubBox: Sendable {
    private let value = Mutex<RealtimeHub?>(nil)
    var hub: RealtimeHub? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}
