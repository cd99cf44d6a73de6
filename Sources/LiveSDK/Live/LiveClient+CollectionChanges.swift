// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// What changes reach the windows: an entity's change, a resync; and the result index a query's reads by index use.
extension LiveClient {
    /// The result index of `query`, opened if needed (see ``ResultIndex``).
    func resultIndex(_ query: CollectionQuery) -> ResultIndex {
        if let index = collectionWindows.resultIndexes[query] { return index }
        let realtime = self.realtime
        let index = ResultIndex(query: query, cache: cache) {
            await realtime.acquire(.collection(query.collection))
        } fetchPage: { [weak self] page, limit throws(LiveError) in
            guard let self else { throw LiveError(code: .cloudUnavailable, message: "the engine has stopped") }
            return try await self.queryWithSession(query, page, limit: limit)
        }
        collectionWindows.resultIndexes[query] = index
        return index
    }

    /// A change of an entity (realtime, or a write from this host) reaches every window of its collection.
    ///
    /// - Parameter previous: for an event of the collection's topic, the object's data before the write
    ///   (`.some(nil)`: it did not exist), which keeps each window's `count` exact (see
    ///   ``LiveCollectionState/remoteChanged(_:previous:)``).
    /// - Parameter placing: `false` when the cache already holds a newer copy of the object: the write only
    ///   counts.
    /// - Parameter seq: the realtime event's sequence number: a counted event that the window's last fetch
    ///   already counted is not counted again, and an event that a fetch in progress read past places nothing.
    func collectionsChanged(_ entity: Entity, previous: JSONValue?? = nil, placing: Bool = true, seq: Int64? = nil) {
        for (window, observation) in collectionWindows.observations where window.query.collection == entity.collection {
            windowChanged(window, observation, entity, previous: previous, placing: placing, seq: seq)
        }
        for (query, index) in collectionWindows.resultIndexes where query.collection == entity.collection { index.enqueue(.changed(entity)) }
    }

    /// A change of an entity reaches one window (see ``collectionsChanged(_:previous:placing:seq:)``): applied,
    /// kept to be replayed over a fetch in progress, or asking for a refill when it left the window short.
    func windowChanged(
        _ window: CollectionWindow,
        _ observation: SharedCollectionObservation,
        _ entity: Entity,
        previous: JSONValue?? = nil,
        placing: Bool = true,
        seq: Int64? = nil
    ) {
        var counted = previous
        if let seq, let through = collectionWindows.countedThrough[window], seq <= through { counted = nil }
        observation.apply { $0.remoteChanged(entity, previous: counted, placing: placing) }
        if collectionWindows.changesDuringFetch[window] != nil {
            // Replayed over the fetch's result, and counted if it came after the fetch's read.
            collectionWindows.changesDuringFetch[window]?.append(CollectionEvent(entity: entity, previous: counted, placing: placing, seq: seq))
        } else if observation.needsRefill, !collectionWindows.catchingUp.contains(window) {
            commandSink.yield(.refillCollection(window))
        }
    }

    /// Continuity with the collection's topic was lost: every window of it gets a resync notice, then a refetch.
    func resyncCollections(of collection: String) {
        for (window, observation) in collectionWindows.observations where window.query.collection == collection {
            logger.notice("resync: continuity with the cloud could not be proven", metadata: ["query": "\(window.query.canonicalText)"])
            // A window resuming from its stored result gets no replay now: the fetch replaces it. Left waiting
            // for that replay, the window would never ask for the refill that corrects its count.
            if collectionWindows.catchingUp.remove(window) != nil {
                observation.apply { state in
                    state.resumeAbandoned()
                    return nil
                }
            }
            observation.apply { $0.resyncStarted() }
            commandSink.yield(.refreshCollection(window))
        }
        for (query, index) in collectionWindows.resultIndexes where query.collection == collection { index.enqueue(.reset) }
    }
}
