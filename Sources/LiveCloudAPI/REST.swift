// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// `POST /v1/auth/login` request body.
public struct LoginRequest: Codable, Sendable {
    public var username: String
    public var password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}

/// `POST /v1/auth/login` and `POST /v1/auth/refresh` response body.
public struct LoginResponse: Codable, Sendable {
    public var accessToken: String
    public var tokenType: String
    /// Seconds until `accessToken` expires.
    public var expiresIn: Int
    /// Exchanged once, at `/v1/auth/refresh`, for a new access token and a new refresh token.
    public var refreshToken: String
    /// Seconds until `refreshToken` expires.
    public var refreshExpiresIn: Int
    public var userId: String

    public init(
        accessToken: String,
        tokenType: String = "Bearer",
        expiresIn: Int,
        refreshToken: String,
        refreshExpiresIn: Int,
        userId: String
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.refreshExpiresIn = refreshExpiresIn
        self.userId = userId
    }
}

/// `POST /v1/auth/refresh` request body.
public struct RefreshRequest: Codable, Sendable {
    public var refreshToken: String
    public init(refreshToken: String) { self.refreshToken = refreshToken }
}

/// `PUT /v1/collections/{collection}/objects/{id}` request body: create or replace the object's data.
public struct PutObjectRequest: Codable, Sendable {
    /// The new data; must be a JSON object.
    public var data: JSONValue
    /// When set, the write succeeds only if the stored version is exactly this (0: the object must not exist).
    public var ifVersion: Int64?

    public init(data: JSONValue, ifVersion: Int64? = nil) {
        self.data = data
        self.ifVersion = ifVersion
    }
}

/// `POST /v1/objects/read` request body: the objects to read, of any collections, 1 to
/// ``maximumKeys`` of them (a key may repeat).
public struct ReadObjectsRequest: Codable, Sendable {
    public static let maximumKeys = 1000
    public var keys: [EntityKey]
    public init(keys: [EntityKey]) { self.keys = keys }
}

/// `POST /v1/objects/read` response body: one result per requested key, in the request's order.
public struct ReadObjectsResponse: Codable, Sendable {
    public var results: [ReadObjectResult]
    /// The event log's last sequence number as of the read (0 before the first event; absent from clouds older
    /// than it): the objects reflect every write up to it and none after, so a realtime subscription made later
    /// resumes from it (`since`) without missing a change.
    public var seq: Int64?
    public init(results: [ReadObjectResult], seq: Int64? = nil) {
        self.results = results
        self.seq = seq
    }
}

/// One object of a batched read: its entity, or the error its own `GET` would have answered (`not_found`,
/// with `currentVersion` when it was deleted; `forbidden` when its collection may not be read).
public struct ReadObjectResult: Codable, Sendable {
    public var collection: String
    public var id: String
    public var entity: Entity?
    public var error: ErrorResponse.Body?

    public init(key: EntityKey, entity: Entity? = nil, error: ErrorResponse.Body? = nil) {
        self.collection = key.collection
        self.id = key.id
        self.entity = entity
        self.error = error
    }

    public var key: EntityKey { EntityKey(collection: collection, id: id) }
}

/// The body of every 4xx/5xx response: `{"error": {"code": ..., "message": ..., "currentVersion"?: ...}}`.
public struct ErrorResponse: Codable, Sendable, Error {
    public struct Body: Codable, Sendable {
        public var code: CloudErrorCode
        public var message: String
        /// On `version_conflict`: the version stored now (0 when the object does not exist). On `not_found`
        /// of a `GET` of a deleted object: its deletion's version.
        public var currentVersion: Int64?

        public init(code: CloudErrorCode, message: String, currentVersion: Int64? = nil) {
            self.code = code
            self.message = message
            self.currentVersion = currentVersion
        }
    }

    public var error: Body

    public init(code: CloudErrorCode, message: String, currentVersion: Int64? = nil) {
        self.error = Body(code: code, message: message, currentVersion: currentVersion)
    }
}

/// Stable machine-readable error codes of the cloud API (see `Protocol/cloud/README.md`).
public struct CloudErrorCode: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { self.rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }

    /// Malformed JSON, wrong types, invalid names.
    public static let badRequest = Self(rawValue: "bad_request")
    /// Wrong username or password.
    public static let invalidCredentials = Self(rawValue: "invalid_credentials")
    /// The refresh token is unknown, expired, already used, or revoked by a logout: log in again.
    public static let invalidRefreshToken = Self(rawValue: "invalid_refresh_token")
    /// No, unknown or malformed bearer token.
    public static let unauthenticated = Self(rawValue: "unauthenticated")
    /// The bearer token has expired: log in again (or refresh).
    public static let tokenExpired = Self(rawValue: "token_expired")
    /// The user may not read (or write) this collection.
    public static let forbidden = Self(rawValue: "forbidden")
    /// No such object.
    public static let notFound = Self(rawValue: "not_found")
    /// `ifVersion` did not match the stored version.
    public static let versionConflict = Self(rawValue: "version_conflict")
    /// The `Idempotency-Key` was used already for another request (another method, object or body): 422.
    public static let idempotencyKeyReused = Self(rawValue: "idempotency_key_reused")
    /// The path does not answer the request's method: 405, with `Allow` listing those it answers.
    public static let methodNotAllowed = Self(rawValue: "method_not_allowed")
    /// Too many failed logins lately for the user name or from the address: 429, retry after `Retry-After`.
    public static let tooManyFailedLogins = Self(rawValue: "too_many_failed_logins")
    /// The body is over the size limit.
    public static let payloadTooLarge = Self(rawValue: "payload_too_large")
    /// A request with a body did not say `Content-Type: application/json`: 415.
    public static let unsupportedMediaType = Self(rawValue: "unsupported_media_type")
    /// The request line (its URL) is over 8 KiB: 414.
    public static let uriTooLong = Self(rawValue: "uri_too_long")
    /// The server cannot serve now (fault injection, shutting down); retry later.
    public static let unavailable = Self(rawValue: "unavailable")
    /// Anything the server could not handle; details are in the server's log only.
    public static let internalError = Self(rawValue: "internal_error")
}

/// `GET /v1/stats`: what the server has done, so tests can prove de-duplication by clients.
public struct CloudStats: Codable, Sendable {
    /// Open realtime WebSocket connections.
    public var connections: Int
    /// Realtime subscriptions per topic (a topic appears while at least one connection subscribes to it).
    public var subscriptions: [String: Int]
    /// Object reads (`GET .../objects/{id}`, and each key of a batched read) per `collection/id`, since start.
    public var fetches: [String: Int]
    /// Realtime events written to subscribers, since start.
    public var eventsSent: Int
    /// Successful logins and token refreshes, since start.
    public var logins: Int
    public var refreshes: Int
    /// Requests that read objects by id, since start: a `GET` of one object, or a batched read
    /// (`POST /v1/objects/read`) of many, counts one.
    public var readRequests: Int
    /// Realtime messages received from clients, since start (a batch of requests counts one).
    public var realtimeMessages: Int
    /// Object writes (PUT, PATCH, DELETE) this server decided, since start (refused ones too), and the
    /// transactions they were decided in: writes made at once share a transaction (group commit).
    public var objectWrites: Int
    public var writeTransactions: Int

    public init(
        connections: Int,
        subscriptions: [String: Int],
        fetches: [String: Int],
        eventsSent: Int,
        logins: Int,
        refreshes: Int,
        readRequests: Int = 0,
        realtimeMessages: Int = 0,
        objectWrites: Int = 0,
        writeTransactions: Int = 0
    ) {
        self.connections = connections
        self.subscriptions = subscriptions
        self.fetches = fetches
        self.eventsSent = eventsSent
        self.logins = logins
        self.refreshes = refreshes
        self.readRequests = readRequests
        self.realtimeMessages = realtimeMessages
        self.objectWrites = objectWrites
        self.writeTransactions = writeTransactions
    }

    /// The counters a cloud of an earlier version does not report decode as 0.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        connections = try container.decode(Int.self, forKey: .connections)
        subscriptions = try container.decode([String: Int].self, forKey: .subscriptions)
        fetches = try container.decode([String: Int].self, forKey: .fetches)
        eventsSent = try container.decode(Int.self, forKey: .eventsSent)
        logins = try container.decode(Int.self, forKey: .logins)
        refreshes = try container.decode(Int.self, forKey: .refreshes)
        readRequests = try container.decodeIfPresent(Int.self, forKey: .readRequests) ?? 0
        realtimeMessages = try container.decodeIfPresent(Int.self, forKey: .realtimeMessages) ?? 0
        objectWrites = try container.decodeIfPresent(Int.self, forKey: .objectWrites) ?? 0
        writeTransactions = try container.decodeIfPresent(Int.self, forKey: .writeTransactions) ?? 0
    }
}
