// Licensed under the Apache License, Version 2.0.

/// Limits applied to each new connection (open ones keep the limits they started with).
public struct ConnectionLimits: Sendable, Equatable {
    /// The largest inbound frame, newline included.
    public var maxFrameBytes = 1 << 20
    /// How many bytes may wait for one slow client before it is cut off.
    public var maxQueuedBytesPerConnection = 8 << 20
    /// How long a client may leave its queue unread before it is cut off.
    public var maxStall: Duration = .seconds(30)
    /// Open connections at most; one more is told `connection.closing` (-32003) and closed.
    public var maxConnections = 1024
    /// Live tokens per connection at most; one more observe is answered -32003.
    public var maxTokensPerConnection = 10_000
    /// Requests per second per connection (a burst of as many is allowed); excess ones are answered -32003.
    /// 0, the default, sets no rate: connections are served in turns (``requestsPerTurn``) instead.
    public var maxRequestsPerSecond = 0
    /// Requests a connection has performed in a row before the others with requests waiting get their turn.
    public static let requestsPerTurn = 32

    public init() {}
}
