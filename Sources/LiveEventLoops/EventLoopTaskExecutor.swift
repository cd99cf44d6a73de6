// Licensed under the Apache License, Version 2.0.

import NIOCore

/// A task executor over one event loop: the nonisolated async code of a task that prefers it (an iterator's
/// `next()`, a task group's child, the resumption after an `await` on I/O of that loop) runs on the loop's
/// thread instead of waiting for a thread of the cooperative pool.
///
/// Used where a chain of short steps, each waiting on I/O, must not queue behind unrelated work at every
/// step: the engine's loop in LiveSDK, and the cloud's PostgreSQL write transactions.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop

    public init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
