// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Keeps an observation alive. ``invalidate()`` ends it; so does releasing the token.
///
/// Invalidation is idempotent and thread-safe; once `invalidate()` returns, the observer is not called
/// again (a call already running may finish).
public final class NotificationToken: Sendable {
    private let cancel: Mutex<(@Sendable () -> Void)?>

    init(_ cancel: @escaping @Sendable () -> Void) {
        self.cancel = Mutex(cancel)
    }

    /// Ends the observation.
    public func invalidate() {
        let action = cancel.withLock { action -> (@Sendable () -> Void)? in
            let taken = action
            action = nil
            return taken
        }
        action?()
    }

    /// Whether ``invalidate()`` has been called (or the token ended by itself, for `observeOnce`).
    public var isInvalidated: Bool { cancel.withLock { $0 == nil } }

    deinit { invalidate() }
}
