// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK
import Logging
import ServiceLifecycle

/// Builds the daemon: the engine and the IPC server, as services in dependency order.
///
/// ```swift
/// let daemon = try LiveGateDaemon(configuration: config, logger: logger)
/// try await ServiceGroup(configuration: .init(services: daemon.services, gracefulShutdownSignals: [.sigterm], logger: logger)).run()
/// ```
public struct LiveGateDaemon: Sendable {
    public let services: [any Service]

    public init(
        configuration: DaemonConfiguration,
        logger: Logger,
        notifier: any ReadinessNotifier = SystemdNotifier()
    ) throws {
        let engine = try LiveClient(
            configuration: LiveSDKConfiguration(
                cloudURL: configuration.cloudURL,
                credentials: configuration.credentials,
                stateDirectory: configuration.stateDirectory
            ),
            logger: logger
        )
        let context = DaemonContext(configuration: configuration, engine: engine, hub: ObjectTopicHub(engine: engine, logger: logger))
        services = [
            EngineService(engine: engine),
            IPCServer(context: context, notifier: notifier, logger: logger),
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
