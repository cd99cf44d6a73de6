// Licensed under the Apache License, Version 2.0.

import LiveSDK
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// An engine of its own on the cluster's cloud, run for the duration of `body` (on a loop of `eventLoopGroup`).
func withEngine(
    _ cluster: TestCluster,
    eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    activationPause: Duration = .milliseconds(10),
    activationLongestWait: Duration = .milliseconds(250),
    _ body: (LiveClient) async throws -> Void
) async throws {
    var logger = Logger(label: "engine-test")
    logger.logLevel = .warning
    let configuration = LiveSDKConfiguration(
        cloudURL: cluster.cloudURL,
        credentials: Credentials(username: TestCluster.username, password: TestCluster.password),
        stateDirectory: cluster.directory + "/engine",
        eventLoopGroup: eventLoopGroup,
        activationPause: activationPause,
        activationLongestWait: activationLongestWait
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
    // Bounded: an engine whose run does not end once cancelled (a wait nothing resumes) fails the test, not hangs it.
    let stopped = Mutex(false)
    Task {
        await running.value
        stopped.withLock { $0 = true }
    }
    try await eventually("the engine's run ended after its cancellation", timeout: .seconds(30)) { stopped.withLock { $0 } }
    await engine.close()
}
