// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
import LiveSDK
import Logging
import NIOCore

/// Everything `livegated` needs to run: a configuration file's settings merged with command-line flags.
public struct DaemonConfiguration: Sendable {
    /// The Unix socket clients connect to (ignored when systemd passes a listening socket).
    public var socketPath: String
    /// Permission bits of a socket the daemon binds itself (`socket-mode`; default 0660).
    public var socketMode: UInt16
    /// The group a socket the daemon binds itself is given (`socket-group`); `nil`: the daemon's own group.
    public var socketGroup: UInt32?
    /// Where the cache lives.
    public var stateDirectory: String
    /// The cache's size bound in entities (`nil`: none); unobserved entities are evicted LRU beyond it.
    public var cacheMaxEntities: Int?
    /// How many event loops (threads) serve clients: read their requests, run the fan-out and write their
    /// notifications. `nil` given to the initializer (`auto`): ``defaultEventLoops``.
    public var eventLoops: Int
    /// How often the realtime connection pings the cloud (`realtime-ping-seconds`): one unanswered until the
    /// next gives the connection up (``LiveSDKConfiguration/realtimePingInterval``).
    public var realtimePingInterval: Duration
    public var cloudURL: String
    public var credentials: Credentials
    public var logLevel: Logger.Level
    public var limits: ReloadableSettings.Limits
    /// The file a reload (SIGHUP) re-reads; `nil` when the daemon was configured by flags only.
    public var configPath: String?
    /// A log level given on the command line wins over the file's, also on reload.
    public var logLevelOverride: Logger.Level?
    /// Enables methods that exist only for tests (`debug.wedgeEventLoop`). Never in production.
    public var testHooks: Bool

    public init(
        socketPath: String,
        socketMode: UInt16 = 0o660,
        socketGroup: UInt32? = nil,
        stateDirectory: String,
        cacheMaxEntities: Int? = nil,
        eventLoops: Int? = nil,
        realtimePingInterval: Duration = LiveSDKConfiguration.defaultRealtimePingInterval,
        cloudURL: String,
        credentials: Credentials,
        logLevel: Logger.Level = .info,
        limits: ReloadableSettings.Limits = .init(),
        configPath: String? = nil,
        logLevelOverride: Logger.Level? = nil,
        testHooks: Bool = false
    ) {
        self.socketPath = socketPath
        self.socketMode = socketMode
        self.socketGroup = socketGroup
        self.stateDirectory = stateDirectory
        self.cacheMaxEntities = cacheMaxEntities
        self.eventLoops = max(1, eventLoops ?? Self.defaultEventLoops)
        self.realtimePingInterval = realtimePingInterval
        self.cloudURL = cloudURL
        self.credentials = credentials
        self.logLevel = logLevel
        self.limits = limits
        self.configPath = configPath
        self.logLevelOverride = logLevelOverride
        self.testHooks = testHooks
    }
}

extension DaemonConfiguration {
    /// One event loop fewer than the cores the daemon may run on (NIO's `System.coreCount`: the CPU affinity
    /// and cgroup quota), at least one: the engine (the cloud's socket and the cache) has a thread of its own,
    /// so the daemon's busy threads never outnumber the cores, and the clients that read the notifications
    /// keep a core to do it (Benchmarks.md, one client event loop fewer than the cores).
    public static var defaultEventLoops: Int { max(1, System.coreCount - 1) }
}
