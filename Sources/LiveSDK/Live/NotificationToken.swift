// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Keeps an observation alive. ``invalidate()`` ends it; so does releasing the token.
///
/// Invalidation is idempotent and thread-safe; once `invalidate()` returns, the observer is not called
/// again (a call already running may finish).
public final class NotificationToken: Sendable {
    /// In a struct: a closure stored directly as a `Mutex`'s value is re-wrapped in reabstraction thunks at
    /// every `withLock`.
    private struct Cancel {
        let run: @Sendable () -> Void
    }

    private let cancel: Mutex<Cancel?>

    init(_ cancel: @escaping @Sendable () -> Void) {
        self.cancel = Mutex(Cancel(run: cancel))
    }

    /// Ends the observation.
    public func invalidate() {
        let action = cancel.withLock { action -> Cancel? in
            let taken = action
            action = nil
            return taken
        }
        action?.run()
    }

    /// Whether ``invalidate()`` has been called (or the token ended by itself, for `observeOnce`).
    public var isInvalidated: Bool { cancel.withLock { $0 == nil } }

    deinit { invalidate() }
}
