// Licensed under the Apache License, Version 2.0.

import NIOCore
import Synchronization

/// The connections of one event loop that have bytes waiting, written by one task.
///
/// A fan-out task on a loop gives something to each of the loop's connections; each connection's writer then
/// wants to run. Rather than one task per connection, the writers join a list here and one task, queued after
/// whatever was queued on the loop before the first of them, runs them all: one task per loop instead of
/// hundreds, and what several fan-out tasks queued before it for one connection goes out in one write.
///
/// What a fan-out task offers a connection is written at once (``writeNow(_:)``), but only the first time in a
/// round: from a connection's second such write until the loop's next flush, the writer joins that flush
/// instead. A fan-out task per topic, many topics, one connection (a client observing thousands of objects, a
/// burst of their changes) would otherwise cost a system call per notification on each side of the socket.
package final class LoopFlusher: Sendable {
    /// A writer's drain, kept in a struct (see ``ConnectionOutbox``: a bare closure stored in a box is
    /// re-wrapped on every access).
    package struct Drain: Sendable {
        let run: @Sendable () -> Void
        /// The round in which the writer last wrote at once (``writeNow(_:)``).
        fileprivate let immediateRound = RoundMark()

        package init(run: @escaping @Sendable () -> Void) {
            self.run = run
        }
    }

    /// Read and written on the loop only; atomic so that a drain can be made and passed from any thread.
    fileprivate final class RoundMark: Sendable {
        let round = Atomic<UInt64>(.max)
    }

    private struct State {
        var pending: [Drain] = []
        /// A flush is queued on the loop.
        var flushQueued = false
        /// Counts the flushes run: a round is the time from one flush to the next.
        var round: UInt64 = 0
    }

    let eventLoop: any EventLoop
    /// The chunks the loop's writers give back once written, for the loop's outboxes.
    package let chunks: ChunkPool
    private let state: NIOLoopBoundBox<State>

    package init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        chunks = ChunkPool(eventLoop: eventLoop)
        state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Runs `drain` in the loop's next flush (from any thread; the writer calls it once per wake-up).
    package func schedule(_ drain: Drain) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.schedule(drain) }
            return
        }
        let queue = state.withValue { state -> Bool in
            state.pending.append(drain)
            return Self.queueFlush(&state)
        }
        if queue { eventLoop.execute { self.flush() } }
    }

    /// Runs `drain` now if its writer has not yet written at once in this round, else in the loop's next flush
    /// (with whatever else the fan-out offers the connection until then). On the loop.
    package func writeNow(_ drain: Drain) {
        eventLoop.preconditionInEventLoop()
        let (now, queue) = state.withValue { state -> (Bool, Bool) in
            let round = state.round
            let first = drain.immediateRound.round.exchange(round, ordering: .relaxed) != round
            if !first { state.pending.append(drain) }
            // A flush ends the round, also after a write at once, so that the connection's next write in a
            // later round is at once again.
            return (first, Self.queueFlush(&state))
        }
        if queue { eventLoop.execute { self.flush() } }
        if now { drain.run() }
    }

    /// Whether a flush must be queued now (none is yet).
    private static func queueFlush(_ state: inout State) -> Bool {
        if state.flushQueued { return false }
        state.flushQueued = true
        return true
    }

    private func flush() {
        var drains: [Drain] = []
        state.withValue { state in
            swap(&drains, &state.pending)
            state.flushQueued = false
            state.round &+= 1
        }
        for drain in drains { drain.run() }
        // Hand the emptied array back, so the next flush appends without allocating (unless a drain
        // scheduled another flush meanwhile).
        drains.removeAll(keepingCapacity: true)
        state.withValue { state in
            if state.pending.isEmpty { swap(&drains, &state.pending) }
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
