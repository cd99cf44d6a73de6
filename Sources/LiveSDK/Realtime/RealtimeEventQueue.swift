// Licensed under the Apache License, Version 2.0.

import Synchronization

/// The realtime connection's events on their way to the engine, taken in batches: everything that arrived
/// while the engine was busy, in order.
///
/// The connection reads every message its socket has buffered before the engine runs again (both on the
/// engine's loop), so a burst of cloud events reaches the engine as one batch, and the engine pays once per
/// batch what it paid per event: one cache transaction, one wake-up of each client loop
/// (``LiveClient/handle(_:)-(RealtimeEvent)``). Unbounded like the `AsyncStream` it replaces: the
/// producer is the socket, which NIO stops reading while the engine (on the same thread) is busy.
final class RealtimeEventQueue: Sendable {
    private struct State {
        var events: [RealtimeEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    init() {}

    /// Queues `event`; wakes the engine if it waits.
    func yield(_ event: RealtimeEvent) {
        let waiter = state.withLock { state in
            state.events.append(event)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Every event queued, in order; waits for one when none is. `nil` once the calling task is cancelled.
    ///
    /// The batch is taken when the engine runs, not when it is woken: what arrived in between joins it.
    /// One consumer at a time.
    func next() async -> [RealtimeEvent]? {
        while true {
            let taken: [RealtimeEvent]? = state.withLock { state in
                if Task.isCancelled || state.cancelled { return nil }
                defer { state.events = [] }
                return state.events
            }
            guard let taken else { return nil }
            if !taken.isEmpty { return taken }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if state.cancelled || !state.events.isEmpty { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    state.cancelled = true
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }
}
