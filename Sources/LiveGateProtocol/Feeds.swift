// Licensed under the Apache License, Version 2.0.

/// `feed.subscribe`: every change of a collection (Kinvey's collection subscription).
public struct FeedSubscribeParams: Codable, Sendable {
    public var collection: String
    public init(collection: String) { self.collection = collection }
}

/// What a feed event is.
public enum FeedEventKind: String, Codable, Sendable {
    /// The subscription is in place: every change from now on follows.
    case ready
    /// One change of an object (`snapshot`; `deleted: true` for a deletion).
    case next
    /// The daemon's realtime link changed (`status`).
    case status
    /// Changes made while the link was down could not be replayed: some may be missing.
    case resync
    /// The cloud refused the subscription as the daemon remade it (`error`).
    case error
}

/// `feed.event`'s params after the token, encoded once for every token of the collection.
public struct FeedEventBody: Codable, Sendable, Equatable {
    public var event: FeedEventKind
    /// `next`: the cloud's event sequence number (strictly increasing on a token).
    public var seq: Int64?
    /// `next`: the object as stored after the change (for a deletion, its tombstone's version and no data).
    public var snapshot: ObjectSnapshot?
    /// `next`: `true` when the change deleted the object.
    public var deleted: Bool?
    /// `status`: `offline`, `connecting`, `connected` or `reconnecting`.
    public var status: String?
    /// `error`.
    public var error: RPCError?

    public init(
        event: FeedEventKind,
        seq: Int64? = nil,
        snapshot: ObjectSnapshot? = nil,
        deleted: Bool? = nil,
        status: String? = nil,
        error: RPCError? = nil
    ) {
        self.event = event
        self.seq = seq
        self.snapshot = snapshot
        self.deleted = deleted
        self.status = status
        self.error = error
    }
}
