// Licensed under the Apache License, Version 2.0.

import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import LiveProcess
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Runs the reference cloud — REST + WebSocket realtime over its storage — until SIGTERM or SIGINT, then
/// shuts down gracefully.
///
/// ```swift
/// try await runCloud(configuration, logger: logger) { port in print("listening on \(port)") }
/// ```
/// - Parameter onListening: called with the bound port once the server accepts connections.
public func runCloud(
    _ configuration: CloudConfiguration,
    logger: Logger,
    onListening: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws {
    let faults = configuration.faultInjection ? FaultInjector() : nil
    switch configuration.storage {
    case .sqlite(let path):
        // SQLite calls the hub right after each commit; the hub needs the log's head first.
        let hubBox = HubBox()
        let store = try SQLiteStore(path: path, eventRetention: configuration.eventRetention, logger: logger) { seq, event in
            hubBox.hub?.publish(seq: seq, event: event)
        }
        defer { try? store.close() }
        let hub = RealtimeHub(lastPublished: try await store.lastSeq())
        hubBox.hub = hub
        let app = try await buildCloudApplication(
            configuration,
            store: store,
            hub: hub,
            faults: faults,
            services: [store.checkpointService],
            logger: logger,
            onListening: onListening
        )
        try await app.runService()
    case .postgres(let postgres):
        let client = PostgresClient(configuration: postgres, backgroundLogger: logger)
        let writeLane = PostgresWriteLane(configuration: postgres, logger: logger)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            group.addTask { await writeLane.run() }
            // The client retries connecting for ever; at start, a database that never answers is an error.
            let store = try await withThrowingTaskGroup(of: PostgresStore?.self) { opening in
                opening.addTask {
                    try await PostgresStore(client: client, writeLane: writeLane, eventRetention: configuration.eventRetention, logger: logger)
                }
                opening.addTask {
                    try await Task.sleep(for: configuration.storageConnectTimeout)
                    return nil
                }
                defer { opening.cancelAll() }
                guard let store = try await opening.next() ?? nil else {
                    throw CloudStorageError(
                        "PostgreSQL did not answer within \(configuration.storageConnectTimeout) (the connection errors are logged above)"
                    )
                }
                return store
            }
            let head = try await store.lastSeq()
            let hub = RealtimeHub(lastPublished: head)
            let pump = PostgresEventPump(store: store, hub: hub, after: head, faults: faults)
            let app = try await buildCloudApplication(
                configuration,
                store: store,
                hub: hub,
                faults: faults,
                services: [pump],
                logger: logger,
                onListening: onListening
            )
            try await app.runService()
            group.cancelAll()  // ends client.run() and writeLane.run()
        }
    }
}

/// The application over a store and its hub: routes, fault injection when `faults` is given (the server runs
/// with `--fault-injection`), and `services` run beside the server (and shut down with it).
func buildCloudApplication(
    _ configuration: CloudConfiguration,
    store: any CloudStore,
    hub: RealtimeHub,
    faults: FaultInjector?,
    services: [any Service],
    logger: Logger,
    onListening: @escaping @Sendable (Int) async -> Void
) async throws -> some ApplicationProtocol {
    for stream in configuration.streams { _ = try await store.createStream(stream) }
    let auth = AuthService(
        users: configuration.users,
        tokenLifetime: configuration.tokenLifetime,
        refreshLifetime: configuration.refreshLifetime,
        bcryptCost: configuration.bcryptCost,
        loginFailuresAllowed: configuration.loginFailuresAllowed,
        store: store
    )
    let cap = ConnectionCap(limit: configuration.maxConnections ?? ConnectionCap.defaultLimit(), logger: logger)
    logger.info("connections held at most", metadata: ["maxConnections": "\(cap.limit)"])
    let router = Router(context: CloudRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.middlewares.add(RequestLineMiddleware())
    router.middlewares.add(AllowedMethodsMiddleware(faultInjection: faults != nil))
    router.middlewares.add(StorageErrorMiddleware())
    if let faults {
        router.middlewares.add(FaultMiddleware(faults: faults))
        FaultRoutes(faults: faults, hub: hub, auth: auth).register(on: router)
        logger.warning("fault injection is on: /v1/admin/faults can fail this server on purpose")
    }
    ObjectRoutes(auth: auth, permissions: configuration.permissions, store: store, hub: hub, maxBodyBytes: configuration.maxBodyBytes).register(
        on: router
    )
    StreamRoutes(auth: auth, admins: configuration.admins, store: store, messageLimit: configuration.streamMessageLimit).register(on: router)
    RealtimeRoute(auth: auth, permissions: configuration.permissions, hub: hub, store: store, faults: faults, cap: cap).register(on: router)
    return Application(
        router: router,
        // Realtime messages up to 1 MiB, in one frame or several (a batch of many subscriptions is one message).
        server: .cloudHTTP1WebSocketUpgrade(
            webSocketRouter: router,
            configuration: .init(
                http1: .init(idleTimeout: TimeAmount(configuration.idleTimeout)),
                ws: .init(maxFrameSize: RealtimeClientBatch.maximumBytes)
            ),
            cap: cap,
            warmUpLogger: logger
        ),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "livegate-cloud"),
        // Freed memory given back once a burst is over (glibc keeps it in its arenas: twice the idle size stayed).
        services: services + [MemoryTrimService(logger: logger)],
        onServerRunning: { channel in await onListening(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}

/// Publishes what PostgreSQL's event log commits — this instance's writes and every other instance's — to
/// this instance's hub, until graceful shutdown.
struct PostgresEventPump: Service {
    let store: PostgresStore
    let hub: RealtimeHub
    let after: Int64
    let faults: FaultInjector?

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await store.runEventPump(
                after: after,
                pause: { [faults] in
                    if let delay = faults?.eventPublicationDelay { _ = await FaultInjector.wait(delay) }
                },
                skip: { seq, collection, id in hub.publishUnheard(seq: seq, collection: collection, id: id) },
                publish: { seq, event in hub.publish(seq: seq, event: event) }
            )
        }
    }
}

/// The hub, set once it exists: the store needs a publisher before the hub can learn the store's last seq.
private final class HubBox: Sendable {
    private let value = Mutex<RealtimeHub?>(nil)
    var hub: RealtimeHub? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}
