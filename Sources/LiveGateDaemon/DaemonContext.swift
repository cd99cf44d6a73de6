// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK

/// What every part of the daemon shares.
struct DaemonContext: Sendable {
    let configuration: DaemonConfiguration
    let settings: ReloadableSettings
    let engine: LiveClient
    let hub: ObjectTopicHub
    let collections: CollectionFanout
    let streams: StreamFanout
    let feeds: FeedFanout
    let sessionWatch: SessionWatch
    /// When the daemon started, for `daemon.stats`.
    let startedAt: ContinuousClock.Instant
    let connections: ConnectionRegistry
    /// The flusher (and chunk pool) of each event loop serving clients.
    let flushers: LoopFlushers
    let notifier: any ReadinessNotifier
}
