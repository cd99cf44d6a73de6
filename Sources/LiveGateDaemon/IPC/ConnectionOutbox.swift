// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Synchronization

/// The bounded, coalescing queue of bytes waiting to be written to one client.
///
/// Producers (request handlers, the fan-out) never wait: ``offer(token:prefix:body:)`` and
/// ``enqueue(_:)`` return at once. The connection's writer takes everything queued in one batch.
///
/// - Notifications for the same token coalesce: a newer body replaces an unsent older one (object
///   notifications are states, so the latest is all a slow reader needs). A collection notification is a
///   change, not a state: when it replaces an unsent one, its full-state form (`reset: true`) is queued
///   instead, so the merged changes are never lost.
/// - When more than `maxQueuedBytes` wait, or the writer has been stuck on one batch for longer than
///   `maxStall`, the client is cut off: the queue is replaced by one `connection.closing` notification and
///   nothing more is accepted. One slow client never holds memory or time from the others.
final class ConnectionOutbox: Sendable {
    enum Closure: Equatable, Sendable {
        case open
        /// Closing: what is queued is still written, then the writer ends.
        case draining
    }

    private enum Item {
        case frame(ByteBuffer)
        case notification(token: Int64, prefix: ByteBuffer, body: ByteBuffer, fullState: FullState?)

        var byteCount: Int {
            switch self {
            case .frame(let buffer): buffer.readableBytes
            case .notification(_, let prefix, let body, _): prefix.readableBytes + body.readableBytes
            }
        }
    }

    private struct State {
        var items: [Item] = []
        var indexByToken: [Int64: Int] = [:]
        var queuedBytes = 0
        var closure = Closure.open
        var waiter: CheckedContinuation<[ByteBuffer]?, Never>?
        /// When the batch being written was taken; `nil` while the writer is idle.
        var batchTakenAt: ContinuousClock.Instant?
        var cutOff = false
        var coalesced = 0
    }

    private let state = Mutex(State())
    let maxQueuedBytes: Int
    let maxStall: Duration

    init(maxQueuedBytes: Int, maxStall: Duration) {
        self.maxQueuedBytes = maxQueuedBytes
        self.maxStall = maxStall
    }

    /// Queues a complete frame (a response): never coalesced.
    func enqueue(_ frame: ByteBuffer) {
        push(.frame(frame), token: nil)
    }

    /// The full-state form of a change notification, made only when needed (it is encoded once per change).
    typealias FullState = @Sendable () -> ByteBuffer?

    /// Queues a notification for `token`, replacing an unsent one for the same token. When `fullState` is
    /// given, the body is a change relative to the previous one, and a replacement queues `fullState()`.
    func offer(token: Int64, prefix: ByteBuffer, body: ByteBuffer, fullState: FullState? = nil) {
        push(.notification(token: token, prefix: prefix, body: body, fullState: fullState), token: token)
    }

    /// Stops accepting; queued items (and `final`, if given) are still written, then the writer ends.
    func close(final: ByteBuffer? = nil) {
        let (waiter, batch) = state.withLock { state -> (CheckedContinuation<[ByteBuffer]?, Never>?, [ByteBuffer]?) in
            guard state.closure == .open else { return (nil, nil) }
            if let final {
                state.items.append(.frame(final))
                state.queuedBytes += final.readableBytes
            }
            state.closure = .draining
            guard let waiter = Self.takeWaiter(&state) else { return (nil, nil) }
            return (waiter, state.items.isEmpty ? nil : Self.takeBatch(&state))
        }
        waiter?.resume(returning: batch)
    }

    /// The next batch to write, waiting for one; `nil` once closed and drained.
    func next() async -> [ByteBuffer]? {
        await withCheckedContinuation { continuation in
            let immediate = state.withLock { state -> [ByteBuffer]?? in
                state.batchTakenAt = nil
                if !state.items.isEmpty { return .some(Self.takeBatch(&state)) }
                if state.closure != .open { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let immediate { continuation.resume(returning: immediate) }
        }
    }

    /// Whether this client was cut off for being too slow.
    var wasCutOff: Bool { state.withLock { $0.cutOff } }
    /// How many notifications were replaced by newer ones before being written.
    var coalescedCount: Int { state.withLock { $0.coalesced } }
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    private func push(_ item: Item, token: Int64?) {
        let (waiter, batch) = state.withLock { state -> (CheckedContinuation<[ByteBuffer]?, Never>?, [ByteBuffer]?) in
            guard state.closure == .open else { return (nil, nil) }
            if let token, let index = state.indexByToken[token] {
                var item = item
                if case .notification(_, let prefix, _, let fullState?) = item, let full = fullState() {
                    item = .notification(token: token, prefix: prefix, body: full, fullState: fullState)
                }
                state.queuedBytes += item.byteCount - state.items[index].byteCount
                state.items[index] = item
                state.coalesced += 1
            } else {
                if let token { state.indexByToken[token] = state.items.count }
                state.items.append(item)
                state.queuedBytes += item.byteCount
            }
            let stalled = state.batchTakenAt.map { ContinuousClock.now - $0 >= maxStall } ?? false
            if state.queuedBytes > maxQueuedBytes || stalled {
                Self.cutOff(&state, queuedBytes: state.queuedBytes, stalled: stalled, limit: maxQueuedBytes)
            }
            guard let waiter = Self.takeWaiter(&state) else { return (nil, nil) }
            return (waiter, state.items.isEmpty ? nil : Self.takeBatch(&state))
        }
        waiter?.resume(returning: batch)
    }

    private static func cutOff(_ state: inout State, queuedBytes: Int, stalled: Bool, limit: Int) {
        let reason =
            stalled
            ? "this client did not read its notifications for too long; reconnect and re-observe"
            : "this client fell behind by more than \(limit) bytes of notifications; reconnect and re-observe"
        state.items.removeAll()
        state.indexByToken.removeAll()
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

    private static func takeWaiter(_ state: inout State) -> CheckedContinuation<[ByteBuffer]?, Never>? {
        defer { state.waiter = nil }
        return state.waiter
    }

    private static func takeBatch(_ state: inout State) -> [ByteBuffer] {
        var buffers: [ByteBuffer] = []
        buffers.reserveCapacity(state.items.count * 2)
        for item in state.items {
            switch item {
            case .frame(let buffer): buffers.append(buffer)
            case .notification(_, let prefix, let body, _):
                buffers.append(prefix)
                buffers.append(body)
            }
        }
        state.items.removeAll(keepingCapacity: true)
        state.indexByToken.removeAll(keepingCapacity: true)
        state.queuedBytes = 0
        state.batchTakenAt = .now
        return buffers
    }
}
