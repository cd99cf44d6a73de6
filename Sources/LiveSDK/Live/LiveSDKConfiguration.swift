// Licensed under the Apache License, Version 2.0.

import Foundation
import NIOCore
import NIOPosix

/// What the engine needs to run.
public struct LiveSDKConfiguration: Sendable {
    /// The cloud's base URL, e.g. `http://127.0.0.1:8080`.
    public var cloudURL: String
    public var credentials: Credentials
    /// Where the cache lives (`cache.sqlite` is created there).
    public var stateDirectory: String
    /// At most this many entities stay in the cache; beyond, those no one observes are evicted, least
    /// recently used first. `nil`: no bound.
    public var cacheMaxEntities: Int?
    /// How long a realtime topic stays subscribed after its last observer went (a new observer meanwhile
    /// takes it over with no gap, no new subscription and no refetch).
    public var topicLinger: Duration
    /// The engine runs on one loop of this group (see ``EngineLoop``): the realtime connection's socket, the
    /// engine's actors and the cache write of each realtime event, which blocks the loop for its duration
    /// (tens of µs). A process that keeps its event loops busy with other sockets (the daemon, writing to
    /// its clients) gives the engine a loop of its own, so that cloud events are handled as they arrive
    /// rather than after that work.
    public var eventLoopGroup: any EventLoopGroup
    /// New observations told their cached copy in a burst (a list of thousands opened at once) are read from the
    /// cloud, or resume their topics, once none was told one for this long: until then the engine answers the
    /// burst's cached copies. One on its own is read at once, and so is one whose observer waits for fresh data
    /// (``ObservationRequest/activatesAtOnce``).
    public var activationPause: Duration
    /// However long a burst goes on, none of its observations waits longer than about this to be read.
    public var activationLongestWait: Duration
    /// How often the realtime connection asks the cloud whether it is still there (a WebSocket ping). A ping
    /// not answered by the next one gives the connection up (reconnecting, and resuming its topics): a cloud
    /// that went silent without closing (a network partition, a host gone, a hung process) is noticed within
    /// twice this, instead of the engine believing itself connected while it hears nothing.
    public var realtimePingInterval: Duration
    /// ``realtimePingInterval``'s default: a silent cloud is noticed within 30 s.
    public static let defaultRealtimePingInterval: Duration = .seconds(15)

    public init(
        cloudURL: String,
        credentials: Credentials,
        stateDirectory: String,
        cacheMaxEntities: Int? = nil,
        topicLinger: Duration = .seconds(2),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        activationPause: Duration = .milliseconds(10),
        activationLongestWait: Duration = .milliseconds(250),
        realtimePingInterval: Duration = LiveSDKConfiguration.defaultRealtimePingInterval
    ) {
        self.cloudURL = cloudURL
        self.credentials = credentials
        self.stateDirectory = stateDirectory
        self.cacheMaxEntities = cacheMaxEntities
        self.topicLinger = topicLinger
        self.eventLoopGroup = eventLoopGroup
        self.activationPause = activationPause
        self.activationLongestWait = activationLongestWait
        self.realtimePingInterval = realtimePingInterval
    }
}
