// Licensed under the Apache License, Version 2.0.

import Synchronization

/// The WebSocket handshake did not complete in time.
struct RealtimeHandshakeTimeout: Error, CustomStringConvertible {
    let timeout: Duration
    var description: String { "the realtime connection's handshake did not complete within \(timeout)" }
}

/// One connection attempt's outcome, given once: by the attempt when it ends, or by a timeout or a
/// cancellation while the handshake has not completed.
final class HandshakeGuard: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var outcome: Result<Void, any Error>?
        var connected = false
        var done = false
    }

    private let state = Mutex(State())

    /// The waiter; resumed at once if the outcome is known already.
    func waiting(_ continuation: CheckedContinuation<Void, any Error>) {
        let outcome: Result<Void, any Error>? = state.withLock { state in
            guard !state.done else { return nil }
            guard let outcome = state.outcome else {
                state.continuation = continuation
                return nil
            }
            state.done = true
            return outcome
        }
        if let outcome { continuation.resume(with: outcome) }
    }

    /// The handshake completed: from now on only the attempt's end ends the wait. Returns false when the
    /// attempt was given up already: the connection is not to be used.
    func connected() -> Bool {
        state.withLock { state in
            guard !state.done, state.outcome == nil else { return false }
            state.connected = true
            return true
        }
    }

    func finish(_ outcome: Result<Void, any Error>) { resolve(outcome, onlyIfNotConnected: false) }

    func giveUpIfNotConnected(_ error: any Error) { resolve(.failure(error), onlyIfNotConnected: true) }

    private func resolve(_ outcome: Result<Void, any Error>, onlyIfNotConnected: Bool) {
        let continuation: CheckedContinuation<Void, any Error>? = state.withLock { state in
            guard !state.done, !(onlyIfNotConnected && state.connected) else { return nil }
            guard let continuation = state.continuation else {
                if state.outcome == nil { state.outcome = outcome }
                return nil
            }
            state.done = true
            state.continuation = nil
            return continuation
        }
        continuation?.resume(with: outcome)
    }
}
