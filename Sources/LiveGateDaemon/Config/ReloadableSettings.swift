// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
import LiveGateSystemd
import Logging
import Synchronization

/// The settings a reload may change while clients stay connected. Readers take a consistent copy.
public final class ReloadableSettings: Sendable {
    /// Limits applied to each new connection (open ones keep the limits they started with).
    public typealias Limits = ConnectionLimits

    private let currentLimits: Mutex<Limits>
    private let currentPolicy: Mutex<AccessPolicy>
    /// The level every log handler of the process reads.
    public let logLevelControl: LogLevelControl

    public init(logLevelControl: LogLevelControl, limits: Limits, policy: AccessPolicy = AccessPolicy()) {
        self.logLevelControl = logLevelControl
        currentLimits = Mutex(limits)
        currentPolicy = Mutex(policy)
    }

    /// The access policy new connections are judged by.
    public var policy: AccessPolicy {
        get { currentPolicy.withLock { $0 } }
        set { currentPolicy.withLock { $0 = newValue } }
    }

    public var logLevel: Logger.Level {
        get { logLevelControl.level }
        set { logLevelControl.level = newValue }
    }

    public var limits: Limits {
        get { currentLimits.withLock { $0 } }
        set { currentLimits.withLock { $0 = newValue } }
    }
}
