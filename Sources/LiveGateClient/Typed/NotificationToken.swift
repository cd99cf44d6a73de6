// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import Synchronization

/// Keeps an observation alive: ``invalidate()`` ends it, and so does releasing the token (as the reference
/// SDKs' tokens do). Ending it stops the handler and releases the daemon's token.
public final class NotificationToken: Sendable {
    private struct Parts {
        let delivery: Task<Void, Never>
        let release: @Sendable () -> Void
    }

    private let parts: Mutex<Parts?>
    /// The daemon's token for this observation.
    public let token: Int64

    init(token: Int64, delivery: Task<Void, Never>, release: @escaping @Sendable () -> Void) {
        self.token = token
        parts = Mutex(Parts(delivery: delivery, release: release))
    }

    /// Ends the observation: the handler is not called again (a call already running may finish).
    /// Idempotent and thread-safe.
    public func invalidate() {
        guard
            let parts = parts.withLock({ parts -> Parts? in
                defer { parts = nil }; return parts
            })
        else { return }
        parts.delivery.cancel()
        parts.release()
    }

    public var isInvalidated: Bool { parts.withLock { $0 == nil } }

    deinit { invalidate() }
}

extension LiveGateConnection {
    /// Ends the daemon's token in the background (a token being released cannot wait for the answer); when
    /// the connection has closed, the daemon has ended the token already.
    func releaseInBackground(_ token: Int64) {
        Task { try? await self.invalidate(token: token) }
    }

    /// A token for the daemon's `token` whose `elements` are delivered, each as `transform` makes it, one
    /// after another until the token ends (which also ends the daemon's token).
    func deliveringToken<Element: Sendable, Event: Sendable>(
        _ token: Int64,
        _ elements: AsyncThrowingStream<Element, any Error>,
        as transform: @escaping @Sendable (Element) -> Event,
        _ deliver: @escaping @Sendable (Event) async -> Void
    ) -> NotificationToken {
        let task = deliveryTask(elements) { element in
            await deliver(transform(element))
            return true
        }
        return NotificationToken(token: token, delivery: task) { self.releaseInBackground(token) }
    }

    /// Runs `deliver` for each element of `elements`, in order, until cancelled or `deliver` returns false.
    func deliveryTask<Element: Sendable>(
        _ elements: AsyncThrowingStream<Element, any Error>,
        _ deliver: @escaping @Sendable (Element) async -> Bool
    ) -> Task<Void, Never> {
        Task {
            do {
                for try await element in elements {
                    if Task.isCancelled { return }
                    if await !deliver(element) { return }
                }
            } catch {
                // The connection closed: the observation ends with it.
            }
        }
    }
}
