// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Work on its way to the engine, taken in batches: everything that arrived while the engine was busy, in
/// order. The engine's commands (observations to start, fetch or release) and the realtime connection's
/// events each go through one.
///
/// The connection reads every message its socket has buffered before the engine runs again (both on the
/// engine's loop), so a burst of cloud events reaches the engine as one batch, and the engine pays once per
/// batch what it paid per event: one cache transaction, one wake-up of each client loop
/// (``LiveClient/handle(_:)-(RealtimeEvent)``). Unbounded like the `AsyncStream`s it replaces: the realtime
/// events' producer is the socket, which NIO stops reading while the engine (on the same thread) is busy, and
/// the commands' are the observations themselves. Unlike an `AsyncStream`, whose buffer keeps the capacity of
/// its longest backlog, a batch's storage is given back once the batch is done.
final class BatchQueue<Element: Sendable>: Sendable {
    private struct State {
        var elements: [Element] = []
        var waiter: CheckedContinuation<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    init() {}

    /// Queues `element`; wakes the consumer if it waits.
    func yield(_ element: Element) {
        let waiter = state.withLock { state in
            state.elements.append(element)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Every element queued, in order; waits for one when none is. `nil` once the calling task is cancelled.
    ///
    /// The batch is taken when the consumer runs, not when it is woken: what arrived in between joins it.
    /// One consumer at a time.
    func next() async -> [Element]? {
        while true {
            let taken: [Element]? = state.withLock { state in
                if Task.isCancelled || state.cancelled { return nil }
                defer { state.elements = [] }
                return state.elements
            }
            guard let taken else { return nil }
            if !taken.isEmpty { return taken }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if state.cancelled || !state.elements.isEmpty { return true }
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
