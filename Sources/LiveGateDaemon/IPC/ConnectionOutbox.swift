// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Synchronization

/// The bounded, coalescing queue of bytes waiting to be written to one client.
///
/// Producers (request handlers, the fan-out) never wait: ``offer(token:prefix:body:fullState:)`` and
/// ``enqueue(_:)`` return at once. The first item queued while the writer is idle calls the writer's wake-up
/// (``setWakeup(_:)``); the writer then ``take()``s everything queued in one batch, so items that arrive while
/// it is busy are written together.
///
/// - A client that keeps up receives every notification. Once it falls behind — its socket is full, or
///   half the byte budget is queued — notifications for the same token coalesce: a newer body replaces an
///   unsent older one (object notifications are states, so the latest is all a slow reader needs). A
///   collection notification is a change, not a state: when it replaces an unsent one, its full-state form
///   (`reset: true`) is queued instead, so the merged changes are never lost.
/// - When more than `maxQueuedBytes` wait, or the writer has been blocked (the client's socket full) for
///   longer than `maxStall`, the client is cut off: the queue is replaced by one `connection.closing`
///   notification and nothing more is accepted. One slow client never holds memory or time from the others.
final class ConnectionOutbox: Sendable {
    enum Closure: Equatable, Sendable {
        case open
        /// Closing: what is queued is still written, then the writer ends.
        case draining
    }

    /// The full-state form of a change notification, made only when needed (it is encoded once per change).
    typealias FullState = @Sendable () -> ByteBuffer?

    private enum Item {
        case frame(ByteBuffer)
        /// May be replaced by a newer one for the same token.
        case notification(token: Int64, prefix: ByteBuffer, body: ByteBuffer, fullState: FullState?)
        /// Never replaced (a stream message).
        case message(prefix: ByteBuffer, body: ByteBuffer)

        var byteCount: Int {
            switch self {
            case .frame(let buffer): buffer.readableBytes
            case .notification(_, let prefix, let body, _), .message(let prefix, let body): prefix.readableBytes + body.readableBytes
            }
        }
    }

    private struct State {
        var items: [Item] = []
        var indexByToken: [Int64: Int] = [:]
        /// Whether `indexByToken` covers `items` (see ``push(_:token:)``).
        var indexed = false
        var queuedBytes = 0
        var closure = Closure.open
        /// Set when the wake-up was called and the writer has not taken the queue since.
        var wakeupPending = false
        /// Since when the writer cannot write (the client's socket is full); `nil` while it can.
        var blockedSince: ContinuousClock.Instant?
        var cutOff = false
        var coalesced = 0
    }

    private let state = Mutex(State())
    /// A closure kept in a struct: a closure stored directly as a `Mutex`'s value is re-wrapped in a pair
    /// of reabstraction thunks at every `withLock` (the `inout` write-back), so calling it gets slower with
    /// every access — measured at 11,000 nested thunks after a benchmark's worth of wake-ups.
    private struct Callback {
        let run: @Sendable () -> Void
    }

    private let wakeup = Mutex<Callback?>(nil)
    private let cutOffHandler = Mutex<Callback?>(nil)
    let maxQueuedBytes: Int
    let maxStall: Duration

    init(maxQueuedBytes: Int, maxStall: Duration) {
        self.maxQueuedBytes = maxQueuedBytes
        self.maxStall = maxStall
    }

    /// What the writer calls to be told there is something to take. Called without locks held, once per
    /// transition from "taken" to "something queued" (or closed).
    func setWakeup(_ wake: @escaping @Sendable () -> Void) {
        wakeup.withLock { $0 = Callback(run: wake) }
        // What was queued before the writer existed (an answer, a refusal) is waiting: wake it at once.
        let pending = state.withLock { state -> Bool in
            guard !state.items.isEmpty || state.closure != .open else { return false }
            state.wakeupPending = true
            return true
        }
        if pending { wake() }
    }

    /// Runs `handler` once, when the client is cut off (the connection uses it to close the socket even if
    /// the client never reads again).
    func whenCutOff(_ handler: @escaping @Sendable () -> Void) {
        cutOffHandler.withLock { $0 = Callback(run: handler) }
    }

    /// Queues a complete frame (a response): never coalesced.
    func enqueue(_ frame: ByteBuffer) {
        push(.frame(frame), token: nil)
    }

    /// Queues a notification for `token`, replacing an unsent one for the same token. When `fullState` is
    /// given, the body is a change relative to the previous one, and a replacement queues `fullState()`.
    func offer(token: Int64, prefix: ByteBuffer, body: ByteBuffer, fullState: FullState? = nil) {
        push(.notification(token: token, prefix: prefix, body: body, fullState: fullState), token: token)
    }

    /// Queues a notification for `token` that is never coalesced (a stream message: each one is news, none
    /// replaces another). A client too slow for them is cut off like any other.
    func append(token: Int64, prefix: ByteBuffer, body: ByteBuffer) {
        push(.message(prefix: prefix, body: body), token: nil)
    }

    /// Stops accepting; queued items (and `final`, if given) are still written, then the writer ends.
    func close(final: ByteBuffer? = nil) {
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            if let final {
                state.items.append(.frame(final))
                state.queuedBytes += final.readableBytes
            }
            state.closure = .draining
            return Self.needsWakeup(&state)
        }
        if wake { wakeup.withLock { $0 }?.run() }
    }

    /// Everything queued, in order, and whether the writer is done once it has written it (the outbox is
    /// closed and nothing is left).
    func take() -> (buffers: [ByteBuffer], finished: Bool) {
        state.withLock { state in
            state.wakeupPending = false
            var buffers: [ByteBuffer] = []
            buffers.reserveCapacity(state.items.count * 2)
            for item in state.items {
                switch item {
                case .frame(let buffer): buffers.append(buffer)
                case .notification(_, let prefix, let body, _), .message(let prefix, let body):
                    buffers.append(prefix)
                    buffers.append(body)
                }
            }
            state.items.removeAll(keepingCapacity: true)
            state.indexByToken.removeAll(keepingCapacity: true)
            state.indexed = false
            state.queuedBytes = 0
            return (buffers, state.closure == .draining)
        }
    }

    /// The writer cannot write (the client's socket is full): from now on the stall clock runs.
    func writerBlocked() {
        state.withLock { state in
            if state.blockedSince == nil { state.blockedSince = .now }
        }
    }

    /// The writer can write again.
    func writerUnblocked() {
        state.withLock { $0.blockedSince = nil }
    }

    /// Whether this client was cut off for being too slow.
    var wasCutOff: Bool { state.withLock { $0.cutOff } }
    /// How many notifications were replaced by newer ones before being written.
    var coalescedCount: Int { state.withLock { $0.coalesced } }
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    private func push(_ item: Item, token: Int64?) {
        var cutOffNow = false
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            let behind = state.blockedSince != nil || state.queuedBytes > maxQueuedBytes / 2
            // The index by token is only needed to coalesce, which only happens once the client is behind:
            // built then (from what is queued), not kept up for every notification of a client that keeps up.
            if behind && !state.indexed { Self.index(&state) }
            if let token, behind, let index = state.indexByToken[token] {
                var item = item
                if case .notification(_, let prefix, _, let fullState?) = item, let full = fullState() {
                    item = .notification(token: token, prefix: prefix, body: full, fullState: fullState)
                }
                state.queuedBytes += item.byteCount - state.items[index].byteCount
                state.items[index] = item
                state.coalesced += 1
            } else {
                if let token, state.indexed { state.indexByToken[token] = state.items.count }
                state.items.append(item)
                state.queuedBytes += item.byteCount
            }
            let stalled = state.blockedSince.map { ContinuousClock.now - $0 >= maxStall } ?? false
            if state.queuedBytes > maxQueuedBytes || stalled {
                Self.cutOff(&state, stalled: stalled, limit: maxQueuedBytes)
                cutOffNow = true
            }
            return Self.needsWakeup(&state)
        }
        if wake { wakeup.withLock { $0 }?.run() }
        if cutOffNow, let handler = cutOffHandler.withLock({ $0 }) { handler.run() }
    }

    /// Indexes the queued notifications that may be coalesced, by token (the latest for each).
    private static func index(_ state: inout State) {
        for (position, item) in state.items.enumerated() {
            if case .notification(let token, _, _, _) = item { state.indexByToken[token] = position }
        }
        state.indexed = true
    }

    private static func needsWakeup(_ state: inout State) -> Bool {
        guard !state.wakeupPending else { return false }
        state.wakeupPending = true
        return true
    }

    private static func cutOff(_ state: inout State, stalled: Bool, limit: Int) {
        let reason =
            stalled
            ? "this client did not read its notifications for too long; reconnect and re-observe"
            : "this client fell behind by more than \(limit) bytes of notifications; reconnect and re-observe"
        state.items.removeAll()
        state.indexByToken.removeAll()
        state.indexed = false
        state.queuedBytes = 0
        state.cutOff = true
        state.closure = .draining
        if let final = try? NotificationFrame.standalone(
            method: NotificationMethod.connectionClosing,
            params: ConnectionClosingParams(code: .limitExceeded, message: reason)
        ) {
            state.items.append(.frame(final))
            state.queuedBytes = final.readableBytes
        }
    }
}
