// Licensed under the Apache License, Version 2.0.

import Synchronization

/// A one-shot answer: filled once by the reader, awaited once by the requester, in either order.
final class ResponseSlot<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, any Error>)
        case filled(Result<Value, any Error>)
        case taken
    }

    private let state = Mutex(State.empty)

    /// Fills the slot; later fills are ignored.
    func fill(_ result: Result<Value, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            switch state {
            case .empty:
                state = .filled(result)
                return nil
            case .waiting(let continuation):
                state = .taken
                return continuation
            case .filled, .taken:
                return nil
            }
        }
        waiter?.resume(with: result)
    }

    /// The answer, waiting for it if needed.
    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Value, any Error>? in
                switch state {
                case .empty:
                    state = .waiting(continuation)
                    return nil
                case .filled(let result):
                    state = .taken
                    return result
                case .waiting, .taken:
                    return .failure(LiveGateError.connection("an answer was awaited twice"))
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}
