// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

/// The engine's collection windows: their observations and what is known of each one's fetches and topic.
struct CollectionWindowsState {
    var observations: [CollectionWindow: SharedCollectionObservation] = [:]
    var fetching: Set<CollectionWindow> = []
    var refetchWanted: Set<CollectionWindow> = []
    /// Realtime changes that arrived while a window was being fetched: applied again over the fetch's result,
    /// so a fetch that read older data never wins over a newer event.
    var changesDuringFetch: [CollectionWindow: [CollectionEvent]] = [:]
    /// Per window, the event log's sequence number its last fetch's count was read at: later-arriving events up
    /// to it are in that count already.
    var countedThrough: [CollectionWindow: Int64] = [:]
    /// Per collection topic, the sequence number of the last event applied to the windows: a window stored
    /// while later events are still on their way (queued for the engine, or held during a write) is stored
    /// as of this one, so the next start replays them.
    var eventApplied: [String: Int64] = [:]
    var nextObserver = 0
    /// Windows started from a stored result that knows its topic's sequence number: where to resume from.
    var resumeFrom: [CollectionWindow: Int64] = [:]
    /// Windows whose topic resumed and replays: caught up when the cloud says so.
    var catchingUp: Set<CollectionWindow> = []
    /// Open result indexes (windowed reads by index from the cache), by query.
    var resultIndexes: [CollectionQuery: ResultIndex] = [:]
}

extension LiveClient {
    /// A handle on a query's result. Cheap; observing it is what costs.
    ///
    /// - Parameters:
    ///   - pageSize: items per page, 1-100 (default 20).
    ///   - anchor: start from the first page (default) or the last.
    ///   - pages: the pages the window starts with (default 1), as if paged that many times at once.
    public nonisolated func collection(_ query: CollectionQuery, pageSize: Int = 20, anchor: CollectionAnchor = .first, pages: Int = 1)
        -> LiveCollection
    {
        LiveCollection(client: self, window: CollectionWindow(query: query, pageSize: pageSize, anchor: anchor, pages: pages))
    }

    // MARK: Observing

    func observeCollection(
        _ window: CollectionWindow,
        once: Bool,
        fields: Set<String>? = nil,
        handler: @escaping SharedCollectionObservation.Handler
    ) async -> LiveCollectionToken {
        collectionWindows.nextObserver += 1
        let id = collectionWindows.nextObserver
        let observation = collectionObservation(window, seed: nil)
        let token = LiveCollectionToken(client: self, observer: id, window: window, observation: observation)
        let isNew = !observation.hasStarted
        // The token's liveness guards every call, so none happens after `invalidate()` returned.
        let liveness = token.liveness
        let guarded: SharedCollectionObservation.Handler = { change in
            if liveness.isAlive { handler(change) }
        }
        observation.add(id, SharedCollectionObservation.Observer(once: once, fields: fields, handler: guarded), previous: nil)
        if isNew {
            let pending = await pendingOverlays(in: window.query.collection)
            let cached: (CacheStore.QueryResult, [Entity])?
            do {
                cached = try await cache.queryResult(window.cacheKey, collection: window.query.collection)
                    .flatMap { window.holdsItsPages($0.0, entities: $0.1) ? $0 : nil }
            } catch {
                logger.error("cache read failed", metadata: ["query": "\(window.query.canonicalText)", "error": "\(error)"])
                cached = nil
            }
            if !observation.hasStarted {
                // Only a window that held the whole result resumes: the replay then makes it exactly what a
                // fetch would. A partial one is fetched, since a deletion inside it should pull in an object
                // from beyond its edge, which no replay carries.
                if let stored = cached?.0, let seq = stored.seq, !stored.hasNext, !stored.hasPrevious { collectionWindows.resumeFrom[window] = seq }
                observation.apply { state in
                    for write in pending { _ = state.pendingChanged(write.id, write.overlay) }
                    return state.started(
                        cached: cached.map { (items: $0.1, count: $0.0.count, hasNext: $0.0.hasNext, hasPrevious: $0.0.hasPrevious) },
                        fetching: true
                    )
                }
                commandSink.yield(.activateCollection(window))
            }
        }
        if observation.isUnobserved { commandSink.yield(.releaseCollection(window)) }
        return token
    }

    /// The observation of `window`, made if there is none. When paging (`seed`, the window paged from), it
    /// starts from the seed's state; the caller starts its fetch.
    private func collectionObservation(_ window: CollectionWindow, seed: LiveCollectionChange?) -> SharedCollectionObservation {
        if let existing = collectionWindows.observations[window] { return existing }
        let observation: SharedCollectionObservation
        if let seed {
            observation = SharedCollectionObservation(window: window, seed: seed)
        } else {
            observation = SharedCollectionObservation(window: window)
        }
        collectionWindows.observations[window] = observation
        return observation
    }

    enum PageMove: Sendable {
        case next, previous, reset
    }

    /// Moves an observer to the window with one page more (or back to the first page). The observer receives
    /// the change from what it saw to the new window's state. Returns false when there is no such page.
    func movePage(_ token: LiveCollectionToken, _ move: PageMove) async -> Bool {
        let window = token.window
        guard let observation = collectionWindows.observations[window], !token.isInvalidated else { return false }
        let seen = observation.current
        var target = window
        switch move {
        case .next:
            guard window.anchor == .first, seen.hasNext else { return false }
            target.pages += 1
        case .previous:
            guard window.anchor == .last, seen.hasPrevious else { return false }
            target.pages += 1
        case .reset:
            guard window.pages > 1 else { return false }
            target.pages = 1
        }
        guard let observer = observation.remove(token.observer) else { return false }
        let isNew = collectionWindows.observations[target] == nil
        // A new window starts from this one's count, and so from the point its count was read at.
        if isNew, let through = collectionWindows.countedThrough[window] { collectionWindows.countedThrough[target] = through }
        // Seeded with what the cloud confirmed, not with what is shown: a pending write's data is not the
        // cloud's, and would stay as if confirmed if the write were then rejected (its overlays are placed again
        // below).
        let destination = collectionObservation(target, seed: observation.confirmed)
        token.moved(to: target, observation: destination)
        destination.add(token.observer, observer, previous: seen.items)
        // A new window starts loading before the move returns, so the observer hears "loading" before
        // whatever answers the move (the daemon's reply).
        if isNew {
            destination.apply { $0.fetchStarted() }
            // The seed carries what was confirmed, not what is pending: place the outbox's writes again.
            for write in await pendingOverlays(in: target.query.collection) {
                destination.apply { $0.pendingChanged(write.id, write.overlay) }
            }
            // The fetch starts only now: started before the outbox was read, it could answer during the read,
            // and the new page would reach the observer before its pending writes and the move's answer.
            commandSink.yield(move == .reset ? .activateCollection(target) : .extendCollection(target))
        }
        if token.isInvalidated {  // invalidated meanwhile: it must not stay on the new window
            destination.remove(token.observer)
            if destination.isUnobserved { commandSink.yield(.releaseCollection(target)) }
        }
        if observation.isUnobserved { commandSink.yield(.releaseCollection(window)) }
        return true
    }

    func currentCollection(_ window: CollectionWindow) -> LiveCollectionChange? {
        collectionWindows.observations[window]?.current
    }
}

/// A change of an entity heard while a window is fetched: replayed over the fetch's result.
struct CollectionEvent: Sendable {
    var entity: Entity
    /// For a collection topic's event, the object's data before the write (see ``LiveClient/collectionsChanged(_:previous:placing:seq:)``).
    var previous: JSONValue??
    /// `false` for a copy older than one the cache holds: it only counts.
    var placing: Bool
    var seq: Int64?
}
