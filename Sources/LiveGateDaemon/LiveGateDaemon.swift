// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveProcess
import LiveSDK
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// Builds the daemon: its services in dependency order (the engine first, the IPC server after it; on
/// shutdown the IPC server stops first and the engine, with the cache, last).
///
/// ```swift
/// let daemon = try await LiveGateDaemon(configuration: config, logger: logger)
/// try await ServiceGroup(configuration: .init(services: daemon.services, gracefulShutdownSignals: [.sigterm], logger: logger)).run()
/// ```
public struct LiveGateDaemon: Sendable {
    public let services: [any Service]
    /// The settings a reload changes (the log handler reads its level from here).
    public let settings: ReloadableSettings

    public init(
        configuration: DaemonConfiguration,
        settings: ReloadableSettings,
        logger: Logger,
        notifier: any ReadinessNotifier = SystemdNotifier()
    ) async throws {
        // The cloud's socket gets a thread of its own, so a cloud event never waits behind the fan-out and the
        // writes to clients queued on the shared loops.
        let cloudLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The clients' loops: requests, fan-out and writes (`event-loops`). They live as long as the process,
        // as NIO's shared loops did: a fan-out task or a closing connection may still be scheduled on them
        // while the services stop, and scheduling on a loop that was shut down is an error.
        let clientLoops = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoops)
        let engine = try LiveClient(
            configuration: LiveSDKConfiguration(
                cloudURL: configuration.cloudURL,
                credentials: configuration.credentials,
                stateDirectory: configuration.stateDirectory,
                cacheMaxEntities: configuration.cacheMaxEntities,
                eventLoopGroup: cloudLoop,
                realtimePingInterval: configuration.realtimePingInterval
            ),
            logger: logger
        )
        let context = DaemonContext(
            configuration: configuration,
            settings: settings,
            engine: engine,
            hub: ObjectTopicHub(engine: engine, logger: logger),
            collections: CollectionFanout(engine: engine, logger: logger),
            streams: StreamFanout(engine: engine, logger: logger),
            feeds: FeedFanout(engine: engine, logger: logger),
            sessionWatch: SessionWatch(),
            startedAt: .now,
            connections: ConnectionRegistry(),
            flushers: LoopFlushers(group: clientLoops),
            notifier: notifier
        )
        await CloudEventLog(logger: logger).attach(to: engine)
        StorageEventLog(logger: logger).attach(to: engine)
        await context.sessionWatch.attach(to: engine)
        // Trap SIGHUP now, before READY=1 can be sent: an untrapped SIGHUP would end the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        self.settings = settings
        services = [
            EngineService(engine: engine, eventLoopGroup: cloudLoop),
            ReloadService(context: context, signals: hangups, logger: logger),
            IPCServer(context: context, logger: logger),
            SystemdStatusService(context: context, logger: logger),
            MemoryTrimService(logger: logger),
        ]
    }
}

// The service group names each service `"\(service)"` (its start's configuration, and its debug log lines). By
// default that is a reflection of the service's whole graph of structs (the context, the configuration, every
// part's settings), costly at each start and as long in the debug log. Each service gives its name instead.
extension EngineService: CustomStringConvertible { var description: String { "EngineService" } }
extension ReloadService: CustomStringConvertible { var description: String { "ReloadService" } }
extension IPCServer: CustomStringConvertible { var description: String { "IPCServer" } }
extension SystemdStatusService: CustomStringConvertible { var description: String { "SystemdStatusService" } }

/// Runs the engine until graceful shutdown, then closes the cache and stops the engine's event loop.
struct EngineService: Service {
    let engine: LiveClient
    let eventLoopGroup: MultiThreadedEventLoopGroup

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await engine.run()
        }
        await engine.close()
        try? await eventLoopGroup.shutdownGracefully()
    }
}
