// Licensed under the Apache License, Version 2.0.

import NIOCore

/// The connections of one event loop that have bytes waiting, written by one task.
///
/// A fan-out task on a loop gives something to each of the loop's connections; each connection's writer then
/// wants to run. Rather than one task per connection, the writers join a list here and one task, queued after
/// whatever was queued on the loop before the first of them, runs them all: one task per loop instead of
/// hundreds, and what several fan-out tasks queued before it for one connection goes out in one write.
final class LoopFlusher: Sendable {
    /// A writer's drain, kept in a struct (see ``ConnectionOutbox``: a bare closure stored in a box is
    /// re-wrapped on every access).
    struct Drain: Sendable {
        let run: @Sendable () -> Void
    }

    let eventLoop: any EventLoop
    /// The chunks the loop's writers give back once written, for the loop's outboxes.
    let chunks: ChunkPool
    private let pending: NIOLoopBoundBox<[Drain]>

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        chunks = ChunkPool(eventLoop: eventLoop)
        pending = .makeBoxSendingValue([], eventLoop: eventLoop)
    }

    /// Runs `drain` in the loop's next flush (from any thread; the writer calls it once per wake-up).
    func schedule(_ drain: Drain) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.schedule(drain) }
            return
        }
        let first = pending.withValue { pending -> Bool in
            pending.append(drain)
            return pending.count == 1
        }
        if first { eventLoop.execute { self.flush() } }
    }

    private func flush() {
        var drains: [Drain] = []
        pending.withValue { swap(&drains, &$0) }
        for drain in drains { drain.run() }
        // Hand the emptied array back, so the next flush appends without allocating (unless a drain
        // scheduled another flush meanwhile).
        drains.removeAll(keepingCapacity: true)
        pending.withValue { pending in
            if pending.isEmpty { swap(&drains, &pending) }
        }
    }
}

/// The flusher of each event loop of the group that serves clients.
struct LoopFlushers: Sendable {
    /// The loops: the server binds on this group, so every client's loop has a flusher.
    let group: any EventLoopGroup
    private let byLoop: [ObjectIdentifier: LoopFlusher]

    init(group: any EventLoopGroup) {
        self.group = group
        var byLoop: [ObjectIdentifier: LoopFlusher] = [:]
        for loop in group.makeIterator() { byLoop[ObjectIdentifier(loop)] = LoopFlusher(eventLoop: loop) }
        self.byLoop = byLoop
    }

    /// `loop`'s flusher; `loop` is one of `group`'s.
    func of(_ loop: any EventLoop) -> LoopFlusher {
        guard let flusher = byLoop[ObjectIdentifier(loop)] else { preconditionFailure("\(loop) is not a loop of the clients' group") }
        return flusher
    }
}
