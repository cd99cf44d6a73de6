// Licensed under the Apache License, Version 2.0.

import LiveEventLoops
import NIOCore

/// The one event loop the engine runs on: the realtime connection's socket, the engine's actors (their
/// serial executor) and the tasks they start (their preferred task executor) all run on its thread.
///
/// A cloud event then goes from the socket to the observers' handlers without changing threads: on a loaded
/// machine each switch is also a wait to be scheduled again (Benchmarks.md, the engine on one event loop).
/// Everything on the loop must
/// therefore be short: the engine blocks it for nothing but the cache write of a batch of realtime events
/// (``CacheStore/storeNow(_:)``, one transaction for what the socket had buffered).
struct EngineLoop: Sendable {
    let eventLoop: any EventLoop
    let taskExecutor: EventLoopTaskExecutor

    init(group: any EventLoopGroup) {
        eventLoop = group.next()
        taskExecutor = EventLoopTaskExecutor(eventLoop: eventLoop)
    }

    /// For an actor's `unownedExecutor`: the loop itself (NIO's loops are serial executors).
    var serialExecutor: UnownedSerialExecutor { eventLoop.executor.asUnownedSerialExecutor() }
}
