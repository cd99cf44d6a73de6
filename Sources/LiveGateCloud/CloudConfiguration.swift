// Licensed under the Apache License, Version 2.0.

/// How a `livegate-cloud` instance runs.
public struct CloudConfiguration: Sendable {
    public struct User: Sendable {
        public var name: String
        public var password: String
        public init(name: String, password: String) {
            self.name = name
            self.password = password
        }
    }

    public var host: String
    /// 0 picks a free port; the bound port is reported through `onListening`.
    public var port: Int
    /// Where entities, streams and the event log live.
    public var storage: CloudStorage
    /// How long to wait at start for PostgreSQL to answer before giving up.
    public var storageConnectTimeout: Duration
    public var users: [User]
    /// How long an access token is valid.
    public var tokenLifetime: Duration
    /// How long a refresh token is valid.
    public var refreshLifetime: Duration
    /// The bcrypt cost for passwords given in clear (4 to 31; each step doubles the work).
    public var bcryptCost: UInt8
    /// The largest request body accepted, in bytes.
    public var maxBodyBytes: Int
    /// Serves `/v1/admin/faults`, with which tests provoke outages. Never in production.
    public var faultInjection: Bool
    /// How many events the realtime log keeps for resuming subscribers.
    public var eventRetention: Int64
    /// Who may read and write which collection.
    public var permissions: Permissions
    /// Users who may create streams and set any user's stream ACL.
    public var admins: Set<String>
    /// Streams created at start (if missing), besides those admins create through the API.
    public var streams: [String]
    /// The largest stream message accepted, in bytes of its JSON encoding (Kinvey's limit is 32 KiB).
    public var streamMessageLimit: Int
    /// How long an HTTP connection may go without a request, or take to send a request's head, before it is
    /// closed (nginx's `keepalive_timeout` is 75 s, its `client_header_timeout` 60 s). A realtime WebSocket is not
    /// subject to it (the daemon pings it).
    public var idleTimeout: Duration
    /// Failed logins of a user name, or from an address, before each further attempt waits (1 s, doubling up to
    /// 5 min; a success clears it); 0: never (see ``LoginThrottle``).
    public var loginFailuresAllowed: Int
    /// How many connections the server holds at once (``ConnectionCap``); `nil`: the descriptor limit less 256.
    public var maxConnections: Int?

    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        storage: CloudStorage,
        storageConnectTimeout: Duration = .seconds(30),
        users: [User],
        tokenLifetime: Duration = .seconds(3600),
        refreshLifetime: Duration = .seconds(30 * 86400),
        bcryptCost: UInt8 = 12,
        maxBodyBytes: Int = 1 << 20,
        faultInjection: Bool = false,
        eventRetention: Int64 = 100_000,
        permissions: Permissions = .open,
        admins: Set<String> = [],
        streams: [String] = [],
        streamMessageLimit: Int = 32 * 1024,
        idleTimeout: Duration = .seconds(60),
        loginFailuresAllowed: Int = 5,
        maxConnections: Int? = nil
    ) {
        self.host = host
        self.port = port
        self.storage = storage
        self.storageConnectTimeout = storageConnectTimeout
        self.users = users
        self.tokenLifetime = tokenLifetime
        self.refreshLifetime = refreshLifetime
        self.bcryptCost = min(max(bcryptCost, 4), 31)
        self.maxBodyBytes = maxBodyBytes
        self.faultInjection = faultInjection
        self.eventRetention = eventRetention
        self.permissions = permissions
        self.admins = admins
        self.streams = streams
        self.streamMessageLimit = max(1, streamMessageLimit)
        self.idleTimeout = max(idleTimeout, .milliseconds(100))
        self.loginFailuresAllowed = max(0, loginFailuresAllowed)
        self.maxConnections = maxConnections.map { max(1, $0) }
    }
}
