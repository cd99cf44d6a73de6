// Licensed under the Apache License, Version 2.0.

// MARK: session.state / session.changed

public struct SessionStateParams: Codable, Sendable {
    /// `true`: also send `session.changed` on this connection at every change, until `false` or the
    /// connection closes.
    public var watch: Bool?
    public init(watch: Bool? = nil) { self.watch = watch }
}

/// `session.state`'s answer and `session.changed`'s params: the cloud session and the realtime connection.
public struct SessionStateBody: Codable, Sendable, Equatable {
    /// `notLoggedIn`, `establishing`, `established`, `tokenExpired` or `terminated`.
    public var session: String
    /// The realtime link to the cloud: `offline`, `connecting`, `connected` or `reconnecting`.
    public var connection: String

    public init(session: String, connection: String) {
        self.session = session
        self.connection = connection
    }
}

// MARK: daemon.stats

public struct DaemonStats: Codable, Sendable, Equatable {
    public var version: String
    public var uptimeSeconds: Int
    /// Open client connections, and the tokens they hold (objects and collections).
    public var connections: Int
    public var tokens: Int
    /// Objects observed (each one engine observation, one fetch, one realtime topic, however many tokens).
    public var observedObjects: Int
    public var objectTokens: Int
    /// Collection notification bodies encoded since start (one per change, whatever the number of tokens).
    public var collectionBodiesEncoded: Int
    /// Stream message bodies encoded since start (one per message, whatever the number of tokens).
    public var streamBodiesEncoded: Int
    /// Feed event bodies encoded since start (one per event, whatever the number of tokens).
    public var feedBodiesEncoded: Int
    /// Writes acknowledged to clients and waiting in the outbox for the cloud.
    public var pendingWrites: Int
    public var session: SessionStateBody
    /// A damaged outbox salvaged at start and kept aside, while its file is there (an administrator removes it).
    public var quarantinedOutbox: QuarantinedOutbox?

    public init(
        version: String,
        uptimeSeconds: Int,
        connections: Int,
        tokens: Int,
        observedObjects: Int,
        objectTokens: Int,
        collectionBodiesEncoded: Int,
        streamBodiesEncoded: Int,
        feedBodiesEncoded: Int,
        pendingWrites: Int,
        session: SessionStateBody,
        quarantinedOutbox: QuarantinedOutbox? = nil
    ) {
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.connections = connections
        self.tokens = tokens
        self.observedObjects = observedObjects
        self.objectTokens = objectTokens
        self.collectionBodiesEncoded = collectionBodiesEncoded
        self.streamBodiesEncoded = streamBodiesEncoded
        self.feedBodiesEncoded = feedBodiesEncoded
        self.pendingWrites = pendingWrites
        self.session = session
        self.quarantinedOutbox = quarantinedOutbox
    }
}

/// A damaged outbox the daemon salvaged at start: where the damaged file is kept, how many writes were salvaged
/// from it, and how many could not be read (absent when that cannot be known).
public struct QuarantinedOutbox: Codable, Sendable, Equatable {
    public var file: String
    public var salvaged: Int
    public var unreadable: Int?

    public init(file: String, salvaged: Int, unreadable: Int?) {
        self.file = file
        self.salvaged = salvaged
        self.unreadable = unreadable
    }

    /// What `livegatectl stats` and the unit's status say of it.
    public var summary: String {
        let lost = unreadable.map { "\($0) unreadable" } ?? "unreadable unknown"
        return "damaged outbox kept at \(file) (\(salvaged) writes salvaged, \(lost))"
    }
}
