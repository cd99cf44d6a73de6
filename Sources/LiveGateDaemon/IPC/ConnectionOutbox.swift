// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Synchronization

/// The bounded, coalescing queue of bytes waiting to be written to one client.
///
/// Producers (request handlers, the fan-out) never wait: ``offer(token:prefix:body:fullState:)``,
/// ``append(token:prefix:body:)``, ``enqueue(_:)`` and ``close(final:)`` return at once. In the daemon every
/// change to the queue is made on the connection's event loop, in the order producers asked for it (each one
/// is a task on the loop, and a loop runs its tasks in order); the fan-out, already on the loop, queues with
/// ``offerOnLoop(token:prefix:body:)``. So a token's notifications and the connection's answers keep the
/// order they were produced in, and the queue is only ever touched by one thread. The first item queued while
/// the writer is idle calls the writer's wake-up (``setWakeup(_:)``); the writer then ``take()``s everything
/// queued as one buffer, so items that arrive while it is busy are written together. The wake-up says when:
/// what the fan-out offers a token is written at once (``Wakeup/writeNow``), everything else in the loop's
/// next flush (``Wakeup/joinFlush``).
///
/// - A client that keeps up receives every notification: its bytes are copied into chunks as they come
///   (no per-notification reference to the shared body is kept, and the writer writes one buffer).
/// - Once it falls behind — its socket is full, or half the byte budget is queued — notifications queued
///   from then on coalesce per token: a newer body replaces an unsent older one (object notifications are
///   states, so the latest is all a slow reader needs). A collection notification is a change, not a state:
///   when it replaces an unsent one, its full-state form (`reset: true`) is queued instead, so the merged
///   changes are never lost.
/// - When more than `maxQueuedBytes` wait, or the writer has been blocked (the client's socket full) for
///   longer than `maxStall`, the client is cut off: the queue is replaced by one `connection.closing`
///   notification and nothing more is accepted. One slow client never holds memory or time from the others.
package final class ConnectionOutbox: Sendable {
    enum Closure: Equatable, Sendable {
        case open
        /// Closing: what is queued is still written, then the writer ends.
        case draining
    }

    /// When the writer is asked to write what was queued.
    package enum Wakeup: Equatable, Sendable {
        /// In its loop's next flush, together with whatever else is queued for the connection before it runs
        /// (answers to pipelined requests, a goodbye).
        case joinFlush
        /// At once, on the connection's event loop: what a fan-out task offers a token is everything it had
        /// waiting for it, so nothing is gained by waiting, and the bytes just copied are written while they
        /// (and the chunk they are in, which the next connection then takes from the loop's pool) are still
        /// in the processor's cache, rather than in a second pass over every connection of the loop. Once per
        /// round of the loop's flushes: a connection that fan-out tasks of many topics write to joins the next
        /// flush from the second (``LoopFlusher/writeNow(_:)``).
        case writeNow
    }

    /// The full-state form of a change notification, made only when needed (it is encoded once per change).
    package typealias FullState = @Sendable () -> ByteBuffer?

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
        /// What was queued while the client kept up, in order, copied into chunks: written as it is.
        var chunks: [ByteBuffer] = []
        /// What was queued once it fell behind (after `bytes`), where notifications may coalesce.
        var items: [Item] = []
        var indexByToken: [Int64: Int] = [:]
        /// Whether `indexByToken` covers `items` (see ``push(_:token:)``).
        var indexed = false
        var queuedBytes = 0
        var closure = Closure.open
        /// Set when the wake-up was called and the writer has not taken the queue since.
        var wakeupPending = false
        /// Since when the writer cannot write (the client's socket is full); `nil` while it can. (A
        /// `NIODeadline`, not a `ContinuousClock.Instant`: checking a resilient standard-library type's
        /// optional for `nil` is a call through its value witnesses, and this is checked per notification.)
        var blockedSince: NIODeadline?
        var cutOff = false
        var coalesced = 0

        /// Whether nothing is queued, as bytes or as items.
        var isEmpty: Bool { chunks.isEmpty && items.isEmpty }
    }

    private let state = Mutex(State())
    /// A closure kept in a struct. A closure stored directly as a `Mutex`'s value is wrapped again in a pair of
    /// reabstraction thunks at every `withLock` (the `inout` write-back), so each call would cost more than the last.
    private struct Callback {
        let run: @Sendable () -> Void
    }

    private struct WakeupCallback {
        let run: @Sendable (Wakeup) -> Void
    }

    private let wakeup = Mutex<WakeupCallback?>(nil)
    private let cutOffHandler = Mutex<Callback?>(nil)
    let maxQueuedBytes: Int
    /// A `TimeAmount`, compared with `NIODeadline`s (see `blockedSince`).
    let maxStall: TimeAmount
    /// The connection's event loop, where every change is made; `nil`: at once, on the caller's thread (unit
    /// tests, which take from the queue on the same thread).
    let eventLoop: (any EventLoop)?
    /// Where new chunks come from when the loop has spare ones (its writers give them back once written).
    let chunkPool: ChunkPool?

    package init(maxQueuedBytes: Int, maxStall: Duration, eventLoop: (any EventLoop)? = nil, chunkPool: ChunkPool? = nil) {
        self.chunkPool = chunkPool
        self.maxQueuedBytes = maxQueuedBytes
        self.maxStall = TimeAmount(maxStall)
        self.eventLoop = eventLoop
    }

    /// Runs `change` on the event loop, after every change asked for before it.
    private func inOrder(_ change: @escaping @Sendable () -> Void) {
        if let eventLoop { eventLoop.execute(change) } else { change() }
    }

    /// What the writer calls to be told there is something to take, and when to write it. Called without
    /// locks held, once per transition from "taken" to "something queued" (or closed).
    package func setWakeup(_ wake: @escaping @Sendable (Wakeup) -> Void) {
        wakeup.withLock { $0 = WakeupCallback(run: wake) }
        // What was queued before the writer existed (an answer, a refusal) is waiting: wake it at once.
        let pending = state.withLock { state -> Bool in
            guard !state.isEmpty || state.closure != .open else { return false }
            state.wakeupPending = true
            return true
        }
        if pending { wake(.joinFlush) }
    }

    /// Runs `handler` once, when the client is cut off (the connection uses it to close the socket even if
    /// the client never reads again).
    func whenCutOff(_ handler: @escaping @Sendable () -> Void) {
        cutOffHandler.withLock { $0 = Callback(run: handler) }
    }

    /// Queues a complete frame (a response): never coalesced.
    package func enqueue(_ frame: ByteBuffer) {
        inOrder { self.push(prefix: nil, body: frame, token: nil) }
    }

    /// ``enqueue(_:)`` from the connection's event loop itself (a task already there, in the order the
    /// frame was produced in): queued at once.
    func enqueueOnLoop(_ frame: ByteBuffer) {
        eventLoop?.preconditionInEventLoop()
        push(prefix: nil, body: frame, token: nil)
    }

    /// Queues a notification for `token`, replacing an unsent one for the same token. When `fullState` is
    /// given, the body is a change relative to the previous one, and a replacement queues `fullState()`.
    package func offer(token: Int64, prefix: ByteBuffer, body: ByteBuffer, fullState: FullState? = nil) {
        inOrder { self.push(prefix: prefix, body: body, token: token, fullState: fullState) }
    }

    /// ``offer(token:prefix:body:fullState:)`` from the connection's event loop itself (the fan-out, whose
    /// tasks run there in order): queued at once.
    package func offerOnLoop(token: Int64, prefix: ByteBuffer, body: ByteBuffer) {
        eventLoop?.preconditionInEventLoop()
        push(prefix: prefix, body: body, token: token)
    }

    /// Several notifications for `token`, in order, from the connection's event loop: what a fan-out task
    /// that had several changes waiting offers each token (one lock, one wake-up, which asks the writer to
    /// write at once: ``Wakeup/writeNow``). All of `bodies`, or only those at the positions `admitted` when
    /// it is given. They are states (object notifications): once the client is behind, only the last is queued.
    package func offerOnLoop(token: Int64, prefix: ByteBuffer, bodies: SharedBodies, admitted: [Int]? = nil) {
        eventLoop?.preconditionInEventLoop()
        var cutOffNow = false
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            let count = admitted?.count ?? bodies.count
            if copiesBytes(state) {
                copy(prefix, bodies, count: count, position: { admitted?[$0] ?? $0 }, into: &state)
                cutOffNow = cutOffIfOverLimit(&state)
            } else if isBehind(state), count > 0 {
                // Behind, each of these would replace the one before it (object notifications are states):
                // only the last is queued, and the others are counted as coalesced: no item is made for a
                // notification that would be replaced, since clients fall behind when the daemon is busiest.
                let last = admitted?.last ?? (bodies.count - 1)
                queueItem(prefix: prefix, body: bodies.body(at: last), token: token, fullState: nil, in: &state)
                state.coalesced += count - 1
                cutOffNow = cutOffIfOverLimit(&state)
            } else {
                // Items are waiting but the client is no longer behind: each one is queued, none replaced.
                for index in 0..<count where !cutOffNow {
                    let body = bodies.body(at: admitted?[index] ?? index)
                    queueItem(prefix: prefix, body: body, token: token, fullState: nil, in: &state)
                    cutOffNow = cutOffIfOverLimit(&state)
                }
            }
            return Self.needsWakeup(&state)
        }
        afterQueueing(wake: wake ? .writeNow : nil, cutOff: cutOffNow)
    }

    /// One notification, the body at `position` of `bodies`, from the connection's event loop (a fan-out task,
    /// so the writer is asked to write at once). Once the client is behind it replaces an unsent one for
    /// `token`, as ``offer(token:prefix:body:fullState:)`` does; with `token` nil it is news, never replaced,
    /// as ``append(token:prefix:body:)`` is.
    package func offerOnLoop(token: Int64?, prefix: ByteBuffer, bodies: SharedBodies, at position: Int, fullState: FullState?) {
        eventLoop?.preconditionInEventLoop()
        var cutOffNow = false
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            if copiesBytes(state) {
                copy(prefix, bodies, count: 1, position: { _ in position }, into: &state)
            } else {
                queueItem(prefix: prefix, body: bodies.body(at: position), token: token, fullState: fullState, in: &state)
            }
            cutOffNow = cutOffIfOverLimit(&state)
            return Self.needsWakeup(&state)
        }
        afterQueueing(wake: wake ? .writeNow : nil, cutOff: cutOffNow)
    }

    /// Copies `count` notifications, `prefix` and the body at `position(i)` of `bodies` each, into the chunks:
    /// as many as fit in the last chunk with one access to its storage (a `writeBytes` per piece checked
    /// exclusive access to it each time: a tenth of the daemon's time), then the rest into new chunks of the
    /// usual sizes.
    private func copy(_ prefix: ByteBuffer, _ bodies: SharedBodies, count: Int, position: (Int) -> Int, into state: inout State) {
        bodies.bytes.withUnsafeReadableBytes { all in
            prefix.withUnsafeReadableBytes { prefixBytes in
                func notification(_ index: Int) -> UnsafeRawBufferPointer {
                    UnsafeRawBufferPointer(rebasing: all[bodies.range(at: position(index))])
                }
                var next = 0
                while next < count {
                    func size(_ index: Int) -> Int { prefixBytes.count + notification(index).count }
                    reserve(size(next), in: &state.chunks)
                    let room = state.chunks[state.chunks.count - 1].writableBytes
                    var end = next + 1
                    var byteCount = size(next)
                    while end < count, byteCount + size(end) <= room {
                        byteCount += size(end)
                        end += 1
                    }
                    let range = next..<end
                    write(byteCount, into: &state.chunks) { destination in
                        var offset = 0
                        func put(_ piece: UnsafeRawBufferPointer) {
                            guard let source = piece.baseAddress else { return }
                            (destination + offset).copyMemory(from: source, byteCount: piece.count)
                            offset += piece.count
                        }
                        for index in range {
                            put(prefixBytes)
                            put(notification(index))
                        }
                    }
                    state.queuedBytes += byteCount
                    next = end
                }
            }
        }
    }

    /// Queues a notification for `token` that is never coalesced (a stream message: each one is news, none
    /// replaces another). A client too slow for them is cut off like any other.
    package func append(token: Int64, prefix: ByteBuffer, body: ByteBuffer) {
        inOrder { self.push(prefix: prefix, body: body, token: nil) }
    }

    /// Stops accepting; queued items (and `final`, if given) are still written, then the writer ends.
    package func close(final: ByteBuffer? = nil) {
        inOrder { self.closeNow(final: final) }
    }

    private func closeNow(final: ByteBuffer?) {
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            if let final { appendFrame(final, to: &state) }
            state.closure = .draining
            return Self.needsWakeup(&state)
        }
        if wake { wakeup.withLock { $0 }?.run(.joinFlush) }
    }

    /// Everything queued, in order, as a few chunks of bytes, and whether the writer is done once it has
    /// written them (the outbox is closed and nothing is left).
    package func take() -> (chunks: [ByteBuffer], finished: Bool) {
        state.withLock { state in
            state.wakeupPending = false
            var chunks: [ByteBuffer] = []
            swap(&chunks, &state.chunks)
            for item in state.items { copy(item, into: &chunks) }
            state.items.removeAll(keepingCapacity: true)
            state.indexByToken.removeAll(keepingCapacity: true)
            state.indexed = false
            state.queuedBytes = 0
            return (chunks, state.closure == .draining)
        }
    }

    /// The writer cannot write (the client's socket is full): from now on the stall clock runs.
    package func writerBlocked() {
        state.withLock { state in
            if state.blockedSince == nil { state.blockedSince = .now() }
        }
    }

    /// The writer can write again.
    package func writerUnblocked() {
        state.withLock { $0.blockedSince = nil }
    }

    /// Whether this client was cut off for being too slow.
    package var wasCutOff: Bool { state.withLock { $0.cutOff } }
    /// How many notifications were replaced by newer ones before being written.
    package var coalescedCount: Int { state.withLock { $0.coalesced } }
    package var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    private func push(prefix: ByteBuffer?, body: ByteBuffer, token: Int64?, fullState: FullState? = nil) {
        var cutOffNow = false
        let wake = state.withLock { state -> Bool in
            guard state.closure == .open else { return false }
            cutOffNow = queue(prefix: prefix, body: body, token: token, fullState: fullState, in: &state)
            return Self.needsWakeup(&state)
        }
        afterQueueing(wake: wake ? .joinFlush : nil, cutOff: cutOffNow)
    }

    /// Wakes the writer (when `wake` is given) and cuts the client off (when `cutOff`), without locks held.
    private func afterQueueing(wake: Wakeup?, cutOff: Bool) {
        if let wake { wakeup.withLock { $0 }?.run(wake) }
        if cutOff, let handler = cutOffHandler.withLock({ $0 }) { handler.run() }
    }

    /// Queues one frame (`prefix` `nil`), notification (`token` given: it may coalesce) or message; `true`
    /// when that cut the client off. While the client keeps up the bytes are copied, read in place, and no
    /// item is made (each copy of a buffer, in an item or a local, counts a reference to it — the body is
    /// shared by every connection).
    private func queue(prefix: ByteBuffer?, body: ByteBuffer, token: Int64?, fullState: FullState?, in state: inout State) -> Bool {
        if copiesBytes(state) {
            if let prefix { copy(prefix, into: &state.chunks) }
            copy(body, into: &state.chunks)
            state.queuedBytes += (prefix?.readableBytes ?? 0) + body.readableBytes
        } else {
            queueItem(prefix: prefix, body: body, token: token, fullState: fullState, in: &state)
        }
        return cutOffIfOverLimit(&state)
    }

    /// Whether the client is behind: its socket is full, or half the byte budget is queued. Notifications
    /// queued from then on may coalesce.
    private func isBehind(_ state: State) -> Bool {
        state.blockedSince != nil || state.queuedBytes > maxQueuedBytes / 2
    }

    /// Whether what is queued next is copied as bytes: the client keeps up, and nothing waits as items.
    private func copiesBytes(_ state: State) -> Bool {
        state.items.isEmpty && !isBehind(state)
    }

    /// Queues what ``copiesBytes(_:)`` does not copy, as an item; a notification for a token with one unsent
    /// replaces it once the client is behind.
    private func queueItem(prefix: ByteBuffer?, body: ByteBuffer, token: Int64?, fullState: FullState?, in state: inout State) {
        let behind = isBehind(state)
        let item: Item =
            if let prefix {
                if let token {
                    .notification(token: token, prefix: prefix, body: body, fullState: fullState)
                } else {
                    .message(prefix: prefix, body: body)
                }
            } else {
                .frame(body)
            }
        // The index by token is only needed to coalesce, which only happens once the client is behind:
        // built then (from what is queued as items), not kept up for a client that keeps up.
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
    }

    /// Cuts the client off when more than the byte budget waits or the writer has been blocked for longer
    /// than `maxStall`; `true` when it did.
    private func cutOffIfOverLimit(_ state: inout State) -> Bool {
        let stalled = state.blockedSince.map { NIODeadline.now() - $0 >= maxStall } ?? false
        guard state.queuedBytes > maxQueuedBytes || stalled else { return false }
        cutOff(&state, stalled: stalled, limit: maxQueuedBytes)
        return true
    }

    /// Queues `frame` after everything queued, whatever the client's pace and the limit (a last word).
    private func appendFrame(_ frame: ByteBuffer, to state: inout State) {
        if state.items.isEmpty { copy(frame, into: &state.chunks) } else { state.items.append(.frame(frame)) }
        state.queuedBytes += frame.readableBytes
    }

    private func copy(_ item: Item, into chunks: inout [ByteBuffer]) {
        switch item {
        case .frame(let buffer): copy(buffer, into: &chunks)
        case .notification(_, let prefix, let body, _), .message(let prefix, let body):
            copy(prefix, into: &chunks)
            copy(body, into: &chunks)
        }
    }

    /// The first chunk's size: what a client that keeps up usually has waiting (a few notifications).
    package static let firstChunkBytes = 4 << 10
    /// The next chunks' size: below the allocator's threshold for mapping fresh (zeroed) pages, and never
    /// grown by reallocation, which would copy what is queued into fresh pages again and again.
    package static let chunkBytes = 64 << 10

    /// Appends `buffer`'s bytes to the last chunk, or to a new one when they do not fit (reading them in
    /// place: `writeImmutableBuffer` copies the buffer first, and so counts a reference to its storage).
    private func copy(_ buffer: ByteBuffer, into chunks: inout [ByteBuffer]) {
        buffer.withUnsafeReadableBytes { copy($0, into: &chunks) }
    }

    private func copy(_ bytes: UnsafeRawBufferPointer, into chunks: inout [ByteBuffer]) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count, in: &chunks)
        write(bytes.count, into: &chunks) { $0.copyMemory(from: source, byteCount: bytes.count) }
    }

    /// Makes room for `byteCount` bytes after the last chunk's: a new chunk when they do not fit (a spare one
    /// of the loop's when there is one).
    private func reserve(_ byteCount: Int, in chunks: inout [ByteBuffer]) {
        guard chunks.isEmpty || chunks[chunks.count - 1].writableBytes < byteCount else { return }
        let capacity = max(byteCount, chunks.isEmpty ? Self.firstChunkBytes : Self.chunkBytes)
        chunks.append(chunkPool?.take(capacity: capacity) ?? ByteBufferAllocator().buffer(capacity: capacity))
    }

    /// Writes `byteCount` bytes with `write` into the last chunk, which has room for them (``reserve(_:in:)``).
    private func write(_ byteCount: Int, into chunks: inout [ByteBuffer], _ write: (UnsafeMutableRawPointer) -> Void) {
        chunks[chunks.count - 1].withUnsafeMutableWritableBytes { write($0.baseAddress!) }
        chunks[chunks.count - 1].moveWriterIndex(forwardBy: byteCount)
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

    private func cutOff(_ state: inout State, stalled: Bool, limit: Int) {
        let reason =
            stalled
            ? "this client did not read its notifications for too long; reconnect and re-observe"
            : "this client fell behind by more than \(limit) bytes of notifications; reconnect and re-observe"
        state.chunks = []
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
            appendFrame(final, to: &state)
        }
    }
}
