// Licensed under the Apache License, Version 2.0.

import LiveSDK
import Logging
import NIOCore
import NIOPosix

/// An engine of its own on the cluster's cloud, run for the duration of `body` (on a loop of `eventLoopGroup`).
func withEngine(
    _ cluster: TestCluster,
    eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    _ body: (LiveClient) async throws -> Void
) async throws {
    var logger = Logger(label: "engine-test")
    logger.logLevel = .warning
    let configuration = LiveSDKConfiguration(
        cloudURL: cluster.cloudURL,
        credentials: Credentials(username: TestCluster.username, password: TestCluster.password),
        stateDirectory: cluster.directory + "/engine",
        eventLoopGroup: eventLoopGroup
    )
    let engine = try LiveClient(configuration: configuration, logger: logger)
    let running = Task { await engine.run() }
    do {
        try await body(engine)
    } catch {
        running.cancel()
        await running.value
        await engine.close()
        throw error
    }
    running.cancel()
    await running.value
    await engine.close()
}
