// Licensed under the Apache License, Version 2.0.

// MARK: daemon.clients

/// One open connection, as `daemon.clients` describes it.
public struct ClientInfo: Codable, Sendable, Equatable {
    /// The connection's number (`LIVEGATE_CONN` in the journal).
    public var connection: UInt64
    /// The peer's process, user and primary group (`SO_PEERCRED`); absent when the kernel would not say.
    public var pid: Int32?
    public var uid: UInt32?
    public var gid: UInt32?
    /// The name the client gave in `hello`, once it did.
    public var client: String?
    /// `readWrite` or `readOnly`, by the access policy.
    public var access: String
    /// Live tokens the connection holds.
    public var tokens: Int
    /// Notification bytes waiting for the client to read them.
    public var queuedBytes: Int
    /// Notifications replaced by a newer one while the client was behind.
    public var coalesced: Int
    /// Whether the client has been cut off for reading too slowly (its connection is closing).
    public var cutOff: Bool
    /// Seconds since the connection was accepted.
    public var connectedSeconds: Int

    public init(
        connection: UInt64,
        pid: Int32?,
        uid: UInt32?,
        gid: UInt32?,
        client: String?,
        access: String,
        tokens: Int,
        queuedBytes: Int,
        coalesced: Int,
        cutOff: Bool,
        connectedSeconds: Int
    ) {
        self.connection = connection
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.client = client
        self.access = access
        self.tokens = tokens
        self.queuedBytes = queuedBytes
        self.coalesced = coalesced
        self.cutOff = cutOff
        self.connectedSeconds = connectedSeconds
    }
}

/// `daemon.clients`'s answer: every open connection, the caller's included, in the order they connected.
public struct DaemonClientsResult: Codable, Sendable, Equatable {
    public var clients: [ClientInfo]
    public init(clients: [ClientInfo]) { self.clients = clients }
}

// MARK: daemon.setLogLevel

public struct SetLogLevelParams: Codable, Sendable {
    /// `trace`, `debug`, `info`, `notice`, `warning`, `error` or `critical`.
    public var level: String
    public init(level: String) { self.level = level }
}

/// `daemon.setLogLevel`'s answer: the level now, and the one before.
public struct SetLogLevelResult: Codable, Sendable, Equatable {
    public var level: String
    public var previous: String
    public init(level: String, previous: String) {
        self.level = level
        self.previous = previous
    }
}
