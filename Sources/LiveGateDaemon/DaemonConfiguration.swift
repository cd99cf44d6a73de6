// Licensed under the Apache License, Version 2.0.

import LiveSDK

/// Everything `livegated` needs to run.
public struct DaemonConfiguration: Sendable {
    /// The Unix socket clients connect to (ignored when systemd passes a listening socket).
    public var socketPath: String
    /// Permission bits of a socket the daemon binds itself.
    public var socketMode: UInt16
    /// Where the cache lives.
    public var stateDirectory: String
    public var cloudURL: String
    public var credentials: Credentials
    /// The largest inbound frame, newline included.
    public var maxFrameBytes: Int
    /// How many bytes may wait for one slow client before it is cut off.
    public var maxQueuedBytesPerConnection: Int
    /// How long a client may leave its queue unread before it is cut off.
    public var maxStall: Duration

    public init(
        socketPath: String,
        socketMode: UInt16 = 0o660,
        stateDirectory: String,
        cloudURL: String,
        credentials: Credentials,
        maxFrameBytes: Int = 1 << 20,
        maxQueuedBytesPerConnection: Int = 8 << 20,
        maxStall: Duration = .seconds(30)
    ) {
        self.socketPath = socketPath
        self.socketMode = socketMode
        self.stateDirectory = stateDirectory
        self.cloudURL = cloudURL
        self.credentials = credentials
        self.maxFrameBytes = maxFrameBytes
        self.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection
        self.maxStall = maxStall
    }
}

/// The daemon's version, reported by `hello`.
public let livegatedVersion = "0.1.0"
