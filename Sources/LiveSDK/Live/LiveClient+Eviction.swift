// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The cache's size bound (`nil`: none), and when its eviction passes run (``EvictionPacing``).
struct EvictionState {
    var maxEntities: Int?
    var pacing: EvictionPacing?
}

// The cache's size bound: eviction passes, paced.
extension LiveClient {
    /// Counts stores into the cache toward its size bound, and asks for an eviction pass when one is due
    /// (``EvictionPacing``). The pass runs beside the engine's other work (``evictOverBound()``), never in the path
    /// of the event or the answer that stored: a pass counts the cache and collects every observed object's key,
    /// which grows with the objects observed.
    func cacheStored(_ count: Int, fromRealtime: Bool = false) {
        askForEviction(.stored(count: count, fromRealtime: fromRealtime))
    }

    /// Asks for an eviction pass when the cache has a bound: after stores, and when an object or a window stops
    /// being observed (what it kept in the cache may go; without this the cache stayed over its bound after a
    /// burst of observations ended, until something else was stored).
    func askForEviction(_ ask: EvictionPacing.Ask) {
        guard eviction.pacing != nil else { return }
        pace(eviction.pacing!.ask(ask, now: .now))
    }

    private func pace(_ action: EvictionPacing.Action) {
        switch action {
        case .none:
            break
        case .run:
            commandSink.yield(.evict)
        case .wakeAt(let instant):
            commandSink.yield(.evictionWakeup(at: instant))
        }
    }

    func evictionBackoffEnded() {
        guard eviction.pacing != nil else { return }
        pace(eviction.pacing!.backoffEnded(now: .now))
    }

    /// Evicts unobserved objects, least recently used first, if the cache holds more than its bound: counts them
    /// first (a read, beside the cache's writer), and only when over the bound collects the keys to keep (every
    /// observed object and every object in an observed window) and deletes in one transaction.
    func evictOverBound() async {
        var overBound = false
        defer {
            if eviction.pacing != nil { pace(eviction.pacing!.passEnded(overBound: overBound, now: .now)) }
        }
        guard let limit = eviction.maxEntities else { return }
        do {
            guard try await cache.entityCount() > limit else { return }
            var protected = Set(objects.observations.keys)
            for observation in collectionWindows.observations.values {
                for entity in observation.current.items { protected.insert(entity.key) }
            }
            let (evicted, remaining) = try await cache.evict(keepingAtMost: limit, protecting: protected)
            overBound = remaining > limit
            if evicted > 0 { logger.debug("cache: evicted least recently used entities", metadata: ["count": "\(evicted)"]) }
        } catch {
            // Cancelled: the engine is stopping (the next run evicts).
            if !Task.isCancelled { logger.error("cache eviction failed", metadata: ["error": "\(error)"]) }
        }
    }
}
