// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK
import Logging
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
        let engine = try LiveClient(
            configuration: LiveSDKConfiguration(
                cloudURL: configuration.cloudURL,
                credentials: configuration.credentials,
                stateDirectory: configuration.stateDirectory,
                cacheMaxEntities: configuration.cacheMaxEntities
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
            flushers: LoopFlushers(group: MultiThreadedEventLoopGroup.singleton),
            notifier: notifier
        )
        await CloudEventLog(logger: logger).attach(to: engine)
        await context.sessionWatch.attach(to: engine)
        // Trap SIGHUP now, before READY=1 can be sent: an untrapped SIGHUP would end the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        self.settings = settings
        services = [
            EngineService(engine: engine),
            ReloadService(context: context, signals: hangups, logger: logger),
            IPCServer(context: context, logger: logger),
            SystemdStatusService(context: context, logger: logger),
        ]
    }
}

/// Runs the engine until graceful shutdown, then closes the cache.
struct EngineService: Service {
    let engine: LiveClient

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await engine.run()
        }
        await engine.close()
    }
}
