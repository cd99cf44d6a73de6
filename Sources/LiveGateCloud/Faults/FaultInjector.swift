// Licensed under the Apache License, Version 2.0.

import ServiceLifecycle
import Synchronization

/// Faults a test can switch on through `/v1/admin/faults` (only when the server runs with
/// `--fault-injection`): refuse realtime connections for a while, fail or delay REST calls.
final class FaultInjector: Sendable {
    private struct State {
        var refuseConnectionsUntil: ContinuousClock.Instant?
        var failNextRequests = 0
        var loseNextWriteAnswers = 0
        var requestDelay: Duration = .zero
        var realtimeRequestDelay: Duration = .zero
        var eventPublicationDelay: Duration = .zero
        var streamAdmissionDelay: Duration = .zero
    }

    private let state = Mutex(State())

    /// Whether new realtime connections are refused now.
    var refusesConnections: Bool {
        state.withLock { state in state.refuseConnectionsUntil.map { ContinuousClock.now < $0 } ?? false }
    }

    /// What to do with one REST call: wait this long, then fail it (503) or serve it.
    func nextRequest() -> (delay: Duration, fail: Bool) {
        state.withLock { state in
            let fail = state.failNextRequests > 0
            if fail { state.failNextRequests -= 1 }
            return (state.requestDelay, fail)
        }
    }

    /// How long each realtime request (`subscribe`, `unsubscribe`, each of a batch) waits before it is handled.
    var realtimeRequestDelay: Duration { state.withLock { $0.realtimeRequestDelay } }

    /// How long PostgreSQL's event pump waits, once woken, before it reads and publishes what was committed.
    var eventPublicationDelay: Duration { state.withLock { $0.eventPublicationDelay } }

    /// How long a stream subscription waits after reading the stream's ACL, before it is answered.
    var streamAdmissionDelay: Duration { state.withLock { $0.streamAdmissionDelay } }

    /// Whether the answer to an object write just applied is to be lost (replaced by a 503).
    func losesWriteAnswer() -> Bool {
        state.withLock { state in
            guard state.loseNextWriteAnswers > 0 else { return false }
            state.loseNextWriteAnswers -= 1
            return true
        }
    }

    func apply(_ request: FaultRequest) {
        state.withLock { state in
            if let milliseconds = request.refuseConnectionsForMs {
                state.refuseConnectionsUntil = .now + .milliseconds(milliseconds)
            }
            if let count = request.failRequests { state.failNextRequests = count }
            if let count = request.loseWriteAnswers { state.loseNextWriteAnswers = count }
            if let milliseconds = request.delayRequestsMs { state.requestDelay = .milliseconds(milliseconds) }
            if let milliseconds = request.delayRealtimeRequestsMs { state.realtimeRequestDelay = .milliseconds(milliseconds) }
            if let milliseconds = request.delayEventPublicationMs { state.eventPublicationDelay = .milliseconds(milliseconds) }
            if let milliseconds = request.delayStreamAdmissionMs { state.streamAdmissionDelay = .milliseconds(milliseconds) }
        }
    }

    func clear() {
        state.withLock { $0 = State() }
    }

    /// Waits out an injected delay, or until the server shuts down gracefully (a connection's task hears it as
    /// its ``ConnectionShutdown``, a service's through ServiceLifecycle) or the task is cancelled: a delay never
    /// holds a stop (SIGTERM) back. Returns whether the whole delay passed.
    static func wait(_ delay: Duration) async -> Bool {
        guard delay > .zero else { return true }
        let sleeping = Task { try await Task.sleep(for: delay) }
        return await withTaskCancellationHandler {
            await ConnectionShutdown.withHandler {
                await withGracefulShutdownHandler {
                    (try? await sleeping.value) != nil
                } onGracefulShutdown: {
                    sleeping.cancel()
                }
            } onShutdown: {
                sleeping.cancel()
            }
        } onCancel: {
            sleeping.cancel()
        }
    }
}

/// `POST /v1/admin/faults` body; every member is optional and they combine.
struct FaultRequest: Codable, Sendable {
    /// Close every realtime WebSocket now (close code 1001).
    var dropConnections: Bool?
    /// Refuse new realtime connections (503 at the upgrade) for this long.
    var refuseConnectionsForMs: Int?
    /// Answer the next N REST calls (but admin and stats) with 503.
    var failRequests: Int?
    /// Apply the next N object writes (PUT, PATCH, DELETE of an object), then answer each with 503 as if
    /// the answer were lost on the way: what a client retrying with an `Idempotency-Key` must survive.
    var loseWriteAnswers: Int?
    /// Delay every REST call (but admin and stats) by this long; 0 ends it.
    var delayRequestsMs: Int?
    /// Hold every realtime request (each of a batch) this long before handling it; 0 ends it. What a
    /// subscription resuming from `since` replays is read after the wait: writes made meanwhile are in it.
    var delayRealtimeRequestsMs: Int?
    /// PostgreSQL: the event pump waits this long each time it is woken before it reads what was committed,
    /// so events reach the realtime subscribers this much after their writes are answered (on SQLite, which
    /// publishes before answering, it does nothing); 0 ends it.
    var delayEventPublicationMs: Int?
    /// A subscription to a stream topic waits this long after reading the stream's ACL, before it is answered
    /// (an ACL change meanwhile must still end it); 0 ends it.
    var delayStreamAdmissionMs: Int?
    /// Expire every access token now: their next use gets 401 `token_expired`.
    var expireTokens: Bool?

    /// The longest delay or refusal accepted (an hour), and the largest count.
    static let maximumMilliseconds = 3_600_000
    static let maximumCount = 1_000_000

    /// What is wrong with the request, if anything: a duration outside 0 ms to an hour, or a count outside
    /// 0 to a million (a delay of 2^63-1 ms had held a stop back).
    var problem: String? {
        let durations: [(String, Int?)] = [
            ("refuseConnectionsForMs", refuseConnectionsForMs), ("delayRequestsMs", delayRequestsMs),
            ("delayRealtimeRequestsMs", delayRealtimeRequestsMs), ("delayEventPublicationMs", delayEventPublicationMs),
            ("delayStreamAdmissionMs", delayStreamAdmissionMs),
        ]
        for case (let name, let value?) in durations where !(0...Self.maximumMilliseconds).contains(value) {
            return "\(name) must be 0 to \(Self.maximumMilliseconds) (an hour), not \(value)"
        }
        for case (let name, let value?) in [("failRequests", failRequests), ("loseWriteAnswers", loseWriteAnswers)]
        where !(0...Self.maximumCount).contains(value) {
            return "\(name) must be 0 to \(Self.maximumCount), not \(value)"
        }
        return nil
    }
}
