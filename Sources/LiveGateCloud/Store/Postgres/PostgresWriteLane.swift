// Licensed under the Apache License, Version 2.0.

import LiveEventLoops
import Logging
import NIOPosix
import PostgresNIO

/// The object writes' own way to PostgreSQL: a client on an event loop of its own, and that loop as the
/// preferred executor of the task that runs the write transactions (``GroupCommit``).
///
/// A write transaction is about seven statements one after another under the write lock, and every other
/// write waits for it. On the shared loops each statement's answer waited behind the HTTP connections' reads,
/// then for a thread of the cooperative pool behind the requests' tasks: with 64 writers on 2 cores the
/// lock's statement alone took 3.3 ms from sent to answered. Here each step runs on a thread that does
/// nothing else (Benchmarks.md, "PostgreSQL's write transactions on a loop of their own").
struct PostgresWriteLane: Sendable {
    let client: PostgresClient
    let executor: EventLoopTaskExecutor
    private let group: MultiThreadedEventLoopGroup

    /// A lane to the database `configuration` names: one connection kept open (group commit runs one
    /// transaction at a time), a second while the first reconnects.
    init(configuration: PostgresClient.Configuration, logger: Logger) {
        var configuration = configuration
        configuration.options.minimumConnections = 1
        configuration.options.maximumConnections = 2
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        client = PostgresClient(configuration: configuration, eventLoopGroup: group, backgroundLogger: logger)
        executor = EventLoopTaskExecutor(eventLoop: group.next())
    }

    /// Runs the client until the task is cancelled, then stops the loop (after the server: no write is
    /// left to run on it).
    func run() async {
        await client.run()
        try? await group.shutdownGracefully()
    }
}
