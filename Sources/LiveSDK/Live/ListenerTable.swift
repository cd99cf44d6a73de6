// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// Listeners by topic, each under an id of its own (stream listeners, feed listeners).
struct ListenerTable<Listener> {
    var listeners: [Topic: [Int: Listener]] = [:]
    var nextID = 0
}

/// The engine's stream and feed subscribers.
struct Subscribers {
    var streams = ListenerTable<StreamListener>()
    var feeds = ListenerTable<FeedListener>()
    /// Feed events emitted (the feeds' listeners told), for the statistics and the deliveries' numbers.
    var feedEmissions = 0
}
