// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// Listeners by topic, each under an id of its own (stream listeners, feed listeners).
struct ListenerTable<Listener> {
    var listeners: [Topic: [Int: Listener]] = [:]
    var nextID = 0
}
