// Licensed under the Apache License, Version 2.0.

import CSystemd

/// Tells the service manager about the daemon's state (`sd_notify`). Without `NOTIFY_SOCKET` (not run by
/// systemd) every call does nothing.
public protocol ReadinessNotifier: Sendable {
    /// Sends one notification, e.g. `READY=1\nSTATUS=serving`.
    func notify(_ state: String)
}

/// The real notifier, through libsystemd.
public struct SystemdNotifier: ReadinessNotifier {
    public init() {}

    public func notify(_ state: String) {
        _ = sd_notify(0, state)
    }
}
