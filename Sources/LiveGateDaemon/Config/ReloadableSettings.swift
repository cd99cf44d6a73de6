// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import Logging
import Synchronization

/// The settings a reload may change while clients stay connected. Readers take a consistent copy.
public final class ReloadableSettings: Sendable {
    /// Limits applied to each new connection (open ones keep the limits they started with).
    public struct Limits: Sendable, Equatable {
        /// The largest inbound frame, newline included.
        public var maxFrameBytes = 1 << 20
        /// How many bytes may wait for one slow client before it is cut off.
        public var maxQueuedBytesPerConnection = 8 << 20
        /// How long a client may leave its queue unread before it is cut off.
        public var maxStall: Duration = .seconds(30)

        public init() {}
    }

    private let currentLimits: Mutex<Limits>
    /// The level every log handler of the process reads.
    public let logLevelControl: LogLevelControl

    public init(logLevelControl: LogLevelControl, limits: Limits) {
        self.logLevelControl = logLevelControl
        currentLimits = Mutex(limits)
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
