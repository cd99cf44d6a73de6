// Licensed under the Apache License, Version 2.0.

import LiveSDK

/// What every connection shares: the configuration, the engine and the fan-out hub.
struct DaemonContext: Sendable {
    let configuration: DaemonConfiguration
    let engine: LiveClient
    let hub: ObjectTopicHub
}
