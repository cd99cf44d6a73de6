// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// The protocol version this build speaks.
public let livegateProtocolVersion = 1

/// Method names of the local protocol.
public enum Method {
    public static let hello = "hello"
    public static let objectObserve = "object.observe"
    public static let objectCreate = "object.create"
    public static let objectUpdate = "object.update"
    public static let objectDelete = "object.delete"
    public static let tokenInvalidate = "token.invalidate"
    public static let collectionObserve = "collection.observe"
    public static let collectionNextPage = "collection.nextPage"
    public static let collectionPreviousPage = "collection.previousPage"
    public static let collectionResetPage = "collection.resetPage"
    public static let collectionItems = "collection.items"
    public static let sessionState = "session.state"
    public static let daemonStats = "daemon.stats"
    /// Every open connection (administrators only: root, the daemon's user, `admin-users`, `admin-groups`).
    public static let daemonClients = "daemon.clients"
    /// Changes the log level until the next reload or restart (administrators only).
    public static let daemonSetLogLevel = "daemon.setLogLevel"
    public static let feedSubscribe = "feed.subscribe"
    public static let streamSend = "stream.send"
    public static let streamPost = "stream.post"
    public static let streamListen = "stream.listen"
    public static let streamFollow = "stream.follow"
    public static let streamGrantAccess = "stream.grantAccess"
    public static let streamAccess = "stream.access"
}

/// Notification names of the local protocol.
public enum NotificationMethod {
    public static let objectChanged = "object.changed"
    public static let collectionChanged = "collection.changed"
    /// The cloud session or the realtime connection changed (to connections that asked with `session.state`).
    public static let sessionChanged = "session.changed"
    /// A change (or the readiness, status, resync or refusal) on a feed token (`feed.subscribe`).
    public static let feedEvent = "feed.event"
    /// A message on a stream token (`stream.listen`, `stream.follow`).
    public static let streamMessage = "stream.message"
    /// A stream token's resync notice or error.
    public static let streamNotice = "stream.notice"
    /// Sent once, just before the daemon closes a connection on its own (slow reader, shutdown).
    public static let connectionClosing = "connection.closing"
}

// MARK: hello

public struct HelloParams: Codable, Sendable {
    /// A name for the client, for the daemon's logs.
    public var client: String
    /// The protocol version the client speaks.
    public var `protocol`: Int

    public init(client: String, protocol: Int = livegateProtocolVersion) {
        self.client = client
        self.protocol = `protocol`
    }
}

public struct HelloResult: Codable, Sendable {
    public var daemon: String
    public var version: String
    public var `protocol`: Int
    /// The cloud session's state: notLoggedIn, establishing, established, tokenExpired, terminated.
    public var session: String
    public var limits: Limits

    public struct Limits: Codable, Sendable {
        /// The largest frame the daemon accepts, in bytes, newline included.
        public var maxFrameBytes: Int
        /// The most requests in one batch (a frame holding an array of requests).
        public var maxBatchRequests: Int
        /// The deepest nesting of arrays and objects in a frame.
        public var maxJSONDepth: Int

        public init(
            maxFrameBytes: Int,
            maxBatchRequests: Int = RequestLimits.maxBatchRequests,
            maxJSONDepth: Int = RequestLimits.maxJSONDepth
        ) {
            self.maxFrameBytes = maxFrameBytes
            self.maxBatchRequests = maxBatchRequests
            self.maxJSONDepth = maxJSONDepth
        }
    }

    public init(daemon: String, version: String, protocol: Int, session: String, limits: Limits) {
        self.daemon = daemon
        self.version = version
        self.protocol = `protocol`
        self.session = session
        self.limits = limits
    }
}

// MARK: object.observe

/// How an observation uses the cache.
public enum ObservePolicy: String, Codable, Sendable, CaseIterable {
    /// The cached version at once (`dataStatus: local`) when there is one, then the fresh one. The default.
    case localThenFresh
    /// Nothing until the cloud has answered: the first notification is `fresh`, `notExist` or an error.
    case freshOnly

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let policy = ObservePolicy(rawValue: raw) else {
            let allowed = Self.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be \(allowed)")
        }
        self = policy
    }
}

public struct ObjectObserveParams: Codable, Sendable, Equatable {
    public var collection: String
    public var id: String
    /// Fire exactly once (local if cached, else fresh), then the token ends by itself.
    public var once: Bool?
    public var policy: ObservePolicy?
    /// Re-observing: the last version this client saw. No snapshot of that version or older is sent, so a
    /// client that reconnects gets no duplicate; a resync notice or a deletion still is.
    public var sinceVersion: Int64?
    /// Top-level fields this token cares about: a change that alters none of them is not sent to it. The
    /// filter is this token's own; other tokens of the object are unaffected.
    public var fields: [String]?

    public init(
        collection: String,
        id: String,
        once: Bool? = nil,
        policy: ObservePolicy? = nil,
        sinceVersion: Int64? = nil,
        fields: [String]? = nil
    ) {
        self.collection = collection
        self.id = id
        self.once = once
        self.policy = policy
        self.sinceVersion = sinceVersion
        self.fields = fields
    }
}

public struct TokenResult: Codable, Sendable, Equatable {
    public var token: Int64
    public init(token: Int64) { self.token = token }
}

// MARK: token.invalidate

public struct TokenParams: Codable, Sendable {
    public var token: Int64
    public init(token: Int64) { self.token = token }
}

public struct InvalidateResult: Codable, Sendable {
    public var invalidated: Bool
    public init(invalidated: Bool) { self.invalidated = invalidated }
}

// MARK: object.create / object.update

public struct ObjectWriteParams: Codable, Sendable {
    public var collection: String
    public var id: String
    /// The object's new data: a JSON object (with `merge`, a JSON merge patch).
    public var data: JSONValue
    /// `object.update` only: succeed only if the stored version is exactly this.
    public var ifVersion: Int64?
    /// `object.update` only: merge `data` into the stored data (RFC 7386) instead of replacing it.
    public var merge: Bool?
    /// `false`: answer as soon as the write is durably queued (`{"queued": true}`), not once the cloud
    /// confirmed it. Default `true`.
    public var wait: Bool?

    public init(collection: String, id: String, data: JSONValue, ifVersion: Int64? = nil, merge: Bool? = nil, wait: Bool? = nil) {
        self.collection = collection
        self.id = id
        self.data = data
        self.ifVersion = ifVersion
        self.merge = merge
        self.wait = wait
    }
}

// MARK: object.delete

public struct ObjectDeleteParams: Codable, Sendable {
    public var collection: String
    public var id: String
    /// Succeed only if the stored version is exactly this.
    public var ifVersion: Int64?
    /// As for `object.update`.
    public var wait: Bool?

    public init(collection: String, id: String, ifVersion: Int64? = nil, wait: Bool? = nil) {
        self.collection = collection
        self.id = id
        self.ifVersion = ifVersion
        self.wait = wait
    }
}

/// A write's answer with `wait: false`: it is in the daemon's durable outbox and will be sent, in order,
/// until the cloud confirms or rejects it (observers of the object see it at once, `pendingWrites: true`).
public struct ObjectQueuedResult: Codable, Sendable, Equatable {
    public var queued: Bool
    public init(queued: Bool = true) { self.queued = queued }
}

public struct ObjectDeleteResult: Codable, Sendable {
    public var deleted: Bool
    /// The version of the deletion (the tombstone's): one more than the last version of the data.
    public var version: Int64

    public init(deleted: Bool, version: Int64) {
        self.deleted = deleted
        self.version = version
    }
}

public struct ObjectWriteResult: Codable, Sendable {
    /// The object as stored by the cloud after the write.
    public var snapshot: ObjectSnapshot
    public init(snapshot: ObjectSnapshot) { self.snapshot = snapshot }
}
