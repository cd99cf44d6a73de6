// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import Synchronization

/// Keeps an observation alive: ``invalidate()`` ends it, and so does releasing the token (as the reference
/// SDKs' tokens do). Ending it stops the handler and releases the daemon's token.
public final class NotificationToken: Sendable {
    private struct State {
        var delivery: Task<Void, Never>?
        /// The daemon's token now, and the connection it belongs to (a client's observation gets a new one
        /// after each reconnection).
        var connection: LiveGateConnection?
        var token: Int64 = 0
        var ended = false
    }

    private let state = Mutex(State())
    /// Whether ending this token ends the daemon's (not for `once` observations, which end by themselves).
    private let releasesDaemonToken: Bool

    init(releasesDaemonToken: Bool) {
        self.releasesDaemonToken = releasesDaemonToken
    }

    /// The daemon's token for this observation now (it changes when a ``LiveGateClient`` observes again
    /// after a reconnection).
    public var token: Int64 { state.withLock { $0.token } }

    /// Ends the observation: the handler is not called again (a call already running may finish).
    /// Idempotent and thread-safe.
    public func invalidate() {
        let (delivery, connection, token) = state.withLock { state -> (Task<Void, Never>?, LiveGateConnection?, Int64) in
            guard !state.ended else { return (nil, nil, 0) }
            state.ended = true
            defer {
                state.delivery = nil
                state.connection = nil
            }
            return (state.delivery, state.connection, state.token)
        }
        delivery?.cancel()
        if releasesDaemonToken, let connection { connection.releaseInBackground(token) }
    }

    public var isInvalidated: Bool { state.withLock { $0.ended } }

    deinit { invalidate() }

    /// The daemon's token now and its connection; `nil` once invalidated.
    var bound: (connection: LiveGateConnection, token: Int64)? {
        state.withLock { state in state.connection.map { ($0, state.token) } }
    }

    /// Makes `token` on `connection` the daemon's token of this observation; false (and nothing changes)
    /// when the observation has ended meanwhile — the caller then releases `token`.
    func bind(_ connection: LiveGateConnection, _ token: Int64) -> Bool {
        state.withLock { state in
            guard !state.ended else { return false }
            state.connection = connection
            state.token = token
            return true
        }
    }

    /// Attaches the task that delivers the observation's events (cancelled at once if the token has ended).
    func attach(_ delivery: Task<Void, Never>) {
        let ended = state.withLock { state in
            if !state.ended { state.delivery = delivery }
            return state.ended
        }
        if ended { delivery.cancel() }
    }
}

extension LiveGateConnection {
    /// Ends the daemon's token in the background (a token being released cannot wait for the answer); when
    /// the connection has closed, the daemon has ended the token already.
    func releaseInBackground(_ token: Int64) {
        Task { try? await self.invalidate(token: token) }
    }
}
