// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// A frozen version of one object as delivered to clients. A newer version is a new snapshot; a snapshot
/// once delivered never changes.
public struct ObjectSnapshot: Codable, Sendable, Hashable {
    public var collection: String
    public var id: String
    /// Strictly increasing per object; equal versions mean equal data.
    public var version: Int64
    public var data: JSONValue
    public var updatedAt: String

    public init(collection: String, id: String, version: Int64, data: JSONValue, updatedAt: String) {
        self.collection = collection
        self.id = id
        self.version = version
        self.data = data
        self.updatedAt = updatedAt
    }
}

/// Where the data of a notification comes from.
public enum DataStatus: String, Codable, Sendable {
    /// There is no such object (yet), as far as the daemon knows.
    case notExist
    /// From the daemon's cache; a fresh copy may follow.
    case local
    /// Confirmed by the cloud, kept current by realtime events.
    case fresh
    /// The data could not be obtained; see `error`.
    case error
}

/// What the daemon is doing to get fresh data.
public enum LoadingStatus: String, Codable, Sendable {
    case notLoading
    case loading
    case loaded
    case error
}

/// `object.changed`: the state of one observed object, sent for each change of data or status.
///
/// On the wire the member `token` comes first and is written per connection; the rest (this type) is
/// encoded once per change and shared by every token that observes the object (see `NotificationFrame`).
public struct ObjectChangedBody: Codable, Sendable, Equatable {
    /// `null` when `dataStatus` is `notExist` (or `error` with nothing cached).
    public var snapshot: ObjectSnapshot?
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: RPCError?
    /// `true` on a resync notice: the daemon cannot prove it saw every change since the previous
    /// notification; the full state follows. Absent otherwise.
    public var resync: Bool?
    /// `true` when the snapshot includes writes of this host the cloud has not confirmed yet; its version
    /// is then the confirmed one they apply to (0 for an object not created yet). Absent otherwise.
    public var pendingWrites: Bool?
    /// `true` (with no snapshot) when a re-observation's object is still at its `sinceVersion`, now confirmed:
    /// keep the snapshot you hold; these are its statuses. Absent otherwise.
    public var unchanged: Bool?

    public init(
        snapshot: ObjectSnapshot?,
        dataStatus: DataStatus,
        loadingStatus: LoadingStatus,
        error: RPCError? = nil,
        resync: Bool? = nil,
        pendingWrites: Bool? = nil,
        unchanged: Bool? = nil
    ) {
        self.snapshot = snapshot
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.error = error
        self.resync = resync
        self.pendingWrites = pendingWrites
        self.unchanged = unchanged
    }

    private enum CodingKeys: String, CodingKey { case snapshot, dataStatus, loadingStatus, error, resync, pendingWrites, unchanged }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(snapshot, forKey: .snapshot)  // explicit null
        try container.encode(dataStatus, forKey: .dataStatus)
        try container.encode(loadingStatus, forKey: .loadingStatus)
        try container.encodeIfPresent(error, forKey: .error)
        if resync == true { try container.encode(true, forKey: .resync) }
        if pendingWrites == true { try container.encode(true, forKey: .pendingWrites) }
        if unchanged == true { try container.encode(true, forKey: .unchanged) }
    }
}

/// `object.changed` as a client decodes it (token and body together).
public struct ObjectChangedParams: Decodable, Sendable, Equatable {
    public var token: Int64
    public var snapshot: ObjectSnapshot?
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: RPCError?
    public var resync: Bool?
    public var pendingWrites: Bool?
    /// See ``ObjectChangedBody/unchanged``.
    public var unchanged: Bool?

    public init(
        token: Int64,
        snapshot: ObjectSnapshot?,
        dataStatus: DataStatus,
        loadingStatus: LoadingStatus,
        error: RPCError? = nil,
        resync: Bool? = nil,
        pendingWrites: Bool? = nil,
        unchanged: Bool? = nil
    ) {
        self.token = token
        self.snapshot = snapshot
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.error = error
        self.resync = resync
        self.pendingWrites = pendingWrites
        self.unchanged = unchanged
    }
}

/// `connection.closing`: why the daemon is about to close this connection.
public struct ConnectionClosingParams: Codable, Sendable {
    public var code: RPCErrorCode
    public var message: String
    public init(code: RPCErrorCode, message: String) {
        self.code = code
        self.message = message
    }
}
