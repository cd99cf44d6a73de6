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

    // MARK: Fetching and realtime

    /// Subscribes the collection's topic, then fetches the window (in that order, so no change falls between).
    /// When the window started from a stored result that holds the whole result and knows its topic's
    /// sequence number (a previous run stored it), the subscription resumes from there instead: the cloud
    /// replays what was missed onto the stored window, and no fetch is needed.
    func activateCollection(_ window: CollectionWindow) async {
        guard let observation = collectionWindows.observations[window] else { return }
        let since = collectionWindows.resumeFrom.removeValue(forKey: window)
        if since != nil {
            collectionWindows.catchingUp.insert(window)
            observation.apply { state in
                state.resumeStarted()
                return nil
            }
        }
        switch await realtime.acquire(.collection(window.query.collection), since: since) {
        case .resumed:
            return  // caughtUp follows the replay
        case .subscribed, .refused:
            if collectionWindows.catchingUp.remove(window) != nil {
                observation.apply { state in
                    state.resumeAbandoned()
                    return nil
                }
            }
            await refreshCollection(window)
        }
    }

    /// The collection's topic replayed every event since the resumption: its resuming windows are fresh,
    /// and stored with the topic's sequence number now.
    func collectionsCaughtUp(_ collection: String) async {
        let windows = collectionWindows.catchingUp.filter { $0.query.collection == collection }
        for window in windows {
            collectionWindows.catchingUp.remove(window)
            guard let observation = collectionWindows.observations[window] else { continue }
            observation.apply { $0.caughtUp() }
            await storeWindow(window, observation)
            if observation.needsRefill { commandSink.yield(.refillCollection(window)) }
        }
    }

    /// Stores every window's confirmed state with its topic's sequence number (when the engine stops), so the
    /// next run resumes each from there.
    func storeCollectionWindows() async {
        for (window, observation) in collectionWindows.observations where !collectionWindows.catchingUp.contains(window) {
            await storeWindow(window, observation)
        }
    }

    private func storeWindow(_ window: CollectionWindow, _ observation: SharedCollectionObservation) async {
        // Only a window the cloud confirmed and that is not being fetched again (after a resync the topic's
        // number is already the new subscription's, ahead of the window): stored otherwise, a restart would
        // resume past changes the window never had.
        let confirmed = observation.confirmed
        guard confirmed.dataStatus == .fresh, confirmed.loadingStatus == .loaded, !collectionWindows.fetching.contains(window),
            let seq = await storedSeq(of: window)
        else { return }
        await storeResult(
            window,
            items: confirmed.items,
            count: confirmed.count,
            hasNext: confirmed.hasNext,
            hasPrevious: confirmed.hasPrevious,
            seq: seq
        )
    }

    /// The sequence number a window's confirmed state is as of: its topic's last one, unless events the topic
    /// received have not been applied yet (they wait in the engine's queue, or are held during a write; at a
    /// stop they are dropped). Then it is the last applied event's, or the window's last fetch's if that read
    /// later: the next start replays what came after it. `nil` when it is not known.
    private func storedSeq(of window: CollectionWindow) async -> Int64? {
        let collection = window.query.collection
        let topic = Topic.collection(collection)
        guard let received = await realtime.lastSeq(of: topic) else { return nil }
        let applied = collectionWindows.eventApplied[collection]
        guard let lastEvent = await realtime.lastEventSeq(of: topic), lastEvent != applied else { return received }
        let asOf = [applied, collectionWindows.countedThrough[window]].compactMap { $0 }.max()
        return asOf.map { min($0, received) }
    }

    /// Stores a window's result (its ids and entities) as of the collection topic's `seq`; a failure is logged.
    /// When the engine is stopping (its tasks are cancelled, and the cache refuses to start a write in a
    /// cancelled task) the result is not stored, and that is not an error: the cache only misses a page the
    /// next start fetches again.
    private func storeResult(_ window: CollectionWindow, items: [Entity], count: Int, hasNext: Bool, hasPrevious: Bool, seq: Int64?) async {
        let result = CacheStore.QueryResult(ids: items.map(\.id), hasNext: hasNext, hasPrevious: hasPrevious, count: count, seq: seq)
        do {
            try await cache.storeQueryResult(window.cacheKey, result, entities: items)
        } catch {
            if Task.isCancelled {
                logger.debug("query result not cached: the engine is stopping", metadata: ["query": "\(window.query.canonicalText)"])
            } else {
                logCacheFailure(error, ["query": "\(window.query.canonicalText)"])
            }
        }
    }

    /// Stores a page's objects in the cache (newer copies only); a failure is logged.
    private func storeEntities(_ entities: [Entity], of window: CollectionWindow) async {
        do {
            try await cache.store(entities.map { CacheStore.Fetched(entity: $0, checkpoint: nil) })
        } catch {
            if !Task.isCancelled { logCacheFailure(error, ["query": "\(window.query.canonicalText)"]) }
        }
    }

    /// Subscribes the collection's topic, then fetches one page beyond the window's seeded items (towards the
    /// end, or the start for a `.last` anchor). On failure, falls back to fetching the whole window.
    func extendCollection(_ window: CollectionWindow) async {
        guard let observation = collectionWindows.observations[window] else { return }
        await realtime.acquire(.collection(window.query.collection))
        // A fetch of the whole window started meanwhile (a resync's, a refill's): it brings the new page too.
        // Two fetches of one window at once would each take the other's replay of the changes that arrived
        // while they ran, and the one that read older data could then win over a newer event.
        guard collectionWindows.observations[window] === observation, !collectionWindows.fetching.contains(window) else { return }
        let seen = observation.confirmed
        // A window paged from one the cloud has not confirmed yet (its cached result, shown while a restarted
        // daemon fetches or replays): a page beyond stale items would join a stale start to a fresh end, and call
        // the whole fresh. The whole window is fetched instead.
        guard seen.dataStatus == .fresh else {
            await refreshCollection(window)
            return
        }
        let page: PageRequest
        switch window.anchor {
        case .first: page = seen.items.last.map { .after(window.query.position(of: $0)) } ?? .first
        case .last: page = seen.items.first.map { .before(window.query.position(of: $0)) } ?? .last
        }
        collectionWindows.changesDuringFetch[window] = []
        collectionWindows.fetching.insert(window)
        observation.apply { $0.fetchStarted() }
        do {
            let result = try await queryWithSession(window.query, page, limit: window.pageSize)
            collectionWindows.fetching.remove(window)
            // The page's objects go to the cache before the window shows them: the cache is what tells a
            // realtime event that an older copy arrives late (a resumed object topic replaying what the page
            // already holds), and such a copy must not place the object in the window again.
            await storeEntities(result.items, of: window)
            // The page read may hold items the window holds too (they moved since it was read): the page's
            // copies are the newer ones; the whole is put in the query's order. The window's items are taken as
            // they are now, after the store, so the changes applied while it ran are in them (a copy taken
            // before would lose them and bring an older version back).
            let fetchedIDs = Set(result.items.map(\.id))
            let query = window.query
            let items = (observation.confirmed.items.filter { !fetchedIDs.contains($0.id) } + result.items).sorted {
                query.areInIncreasingOrder(query.position(of: $0), query.position(of: $1))
            }
            let more = window.anchor == .first ? result.nextCursor != nil : result.previousCursor != nil
            fetched(
                window,
                observation,
                items: items,
                count: result.count,
                hasNext: window.anchor == .first && more,
                hasPrevious: window.anchor == .last && more,
                seq: result.seq,
                readAt: result.seq
            )
            collectionWindows.changesDuringFetch[window] = nil
            if collectionWindows.refetchWanted.remove(window) != nil { await refreshCollection(window) }
        } catch {
            collectionWindows.fetching.remove(window)
            collectionWindows.changesDuringFetch[window] = nil
            logger.warning("query failed", metadata: ["query": "\(window.query.canonicalText)", "error": "\(error)"])
            await refreshCollection(window)
        }
    }

    /// Fetches the window; on failure retries with backoff for as long as it is observed. One fetch per
    /// window at a time; a refresh asked for while one runs makes it fetch once more.
    ///
    /// - Parameter quiet: a refill (items left a window that holds part of the result): observers see the
    ///   refilled window, without a `loading` state before it. So does a fetch made once more.
    func refreshCollection(_ window: CollectionWindow, quiet: Bool = false) async {
        guard let observation = collectionWindows.observations[window] else { return }
        guard !collectionWindows.fetching.contains(window) else {
            collectionWindows.refetchWanted.insert(window)
            return
        }
        collectionWindows.fetching.insert(window)
        defer {
            collectionWindows.fetching.remove(window)
            collectionWindows.changesDuringFetch[window] = nil
        }
        var failures = 0
        var again = false
        while collectionWindows.observations[window] === observation {
            collectionWindows.refetchWanted.remove(window)
            collectionWindows.changesDuringFetch[window] = []
            // `loading` once (not for a quiet refill): a retry after a failure stays `error` until it succeeds,
            // rather than telling observers loading/error again at every attempt.
            if !(quiet || again) { observation.apply { $0.fetchStarted() } }
            again = true
            // The topic is subscribed: every event after this number reaches the window, during the fetch
            // too, so the stored result is as of it (a replay from it later re-applies some, harmlessly).
            let seq = await realtime.lastSeq(of: .collection(window.query.collection))
            do {
                let result = try await fetchWindow(window)
                await storeResult(
                    window,
                    items: result.items,
                    count: result.count,
                    hasNext: result.hasNext,
                    hasPrevious: result.hasPrevious,
                    seq: seq
                )
                fetched(
                    window,
                    observation,
                    items: result.items,
                    count: result.count,
                    hasNext: result.hasNext,
                    hasPrevious: result.hasPrevious,
                    seq: result.seq,
                    readAt: result.firstSeq
                )
                readOutcome(window.query.collection, nil)
                cacheStored(result.items.count)
                failures = 0
                if !collectionWindows.refetchWanted.contains(window) { break }
            } catch {
                failures += 1
                logger.warning("query failed", metadata: ["query": "\(window.query.canonicalText)", "error": "\(error)", "attempt": "\(failures)"])
                observation.apply { $0.fetchFailed(error) }
                readOutcome(window.query.collection, error)
                do {
                    try await retryPause(after: failures)
                } catch {
                    break
                }
            }
        }
        if observation.isUnobserved { commandSink.yield(.releaseCollection(window)) }
        // Released and observed anew while this fetch ran: the new observation gets a fetch of its own.
        if collectionWindows.observations[window] !== observation, collectionWindows.observations[window] != nil,
            collectionWindows.refetchWanted.remove(window) != nil
        {
            commandSink.yield(.refreshCollection(window))
        }
    }

    /// A fetch's outcome, then the realtime changes that arrived while it ran, so that a fetch that read
    /// older data never wins over a newer event.
    ///
    /// - Parameter seq: the event log's sequence number the count was read at (``QueryPage/seq``): the events
    ///   after it count, those up to it are in the count already.
    /// - Parameter readAt: the sequence number every page of the fetch was read at or after (the first
    ///   page's): the events up to it are in the items already, so they place nothing. Replayed over the
    ///   result, such an event would bring back an older copy of an object the result holds a newer one of,
    ///   or placed beyond the window's edge.
    private func fetched(
        _ window: CollectionWindow,
        _ observation: SharedCollectionObservation,
        items: [Entity],
        count: Int,
        hasNext: Bool,
        hasPrevious: Bool,
        seq: Int64?,
        readAt: Int64?
    ) {
        collectionWindows.countedThrough[window] = seq
        // A fetch supersedes a resumption still waiting for its replay (a resync made the cloud drop it):
        // the window no longer waits to be caught up, and a refill it needs is asked for as it comes.
        if collectionWindows.catchingUp.remove(window) != nil {
            observation.apply { state in
                state.resumeAbandoned()
                return nil
            }
        }
        let heldVersions = Dictionary(items.map { ($0.id, $0.version) }, uniquingKeysWith: max)
        let meanwhile = (collectionWindows.changesDuringFetch[window] ?? []).map { event in
            (
                entity: event.entity,
                previous: event.seq.flatMap { eventSeq in eventSeq > (seq ?? 0) ? event.previous : nil },
                placing: LiveCollectionState.placesOverFetch(
                    event.entity,
                    placing: event.placing,
                    seq: event.seq,
                    readAt: readAt,
                    heldVersions: heldVersions
                )
            )
        }
        observation.apply {
            $0.fetchSucceeded(items: items, count: count, hasNext: hasNext, hasPrevious: hasPrevious, changedMeanwhile: meanwhile)
        }
        // The read may be newer than the realtime events applied so far (after a reconnection they follow
        // it): another window of the collection holding an older copy of one of its objects takes the newer
        // one (uncounted: its own events count it), so that a token moving from this window to another (a
        // page more, or back to one) never sees an item go back. Only held items: one another window lacks
        // may have left it by a newer event than this read, and must not come back.
        for (other, otherObservation) in collectionWindows.observations where other != window && other.query.collection == window.query.collection {
            let held = Dictionary(otherObservation.confirmed.items.map { ($0.id, $0.version) }, uniquingKeysWith: max)
            for entity in items where (held[entity.id].map { $0 < entity.version } ?? false) {
                windowChanged(other, otherObservation, entity)
            }
        }
        // Items that left during the fetch may leave the window short of its pages: fetch once more.
        if observation.needsRefill { collectionWindows.refetchWanted.insert(window) }
        // The fetch's read is applied: a change from now on is applied as it comes, and asks for a refill
        // itself (held for a replay that never comes, one arriving while the result is being cached left the
        // window short of its pages until the next change).
        collectionWindows.changesDuringFetch[window] = nil
    }

    /// Reads the window from the cloud: as many pages of up to 100 as it holds, from its anchor.
    /// `seq` is the last page's sequence number (its count is the result's), `firstSeq` the first page's.
    private func fetchWindow(_ window: CollectionWindow) async throws(LiveError) -> (
        items: [Entity], count: Int, hasNext: Bool, hasPrevious: Bool, seq: Int64?, firstSeq: Int64?
    ) {
        var items: [Entity] = []
        var page: PageRequest = window.anchor == .first ? .first : .last
        var count = 0
        var seq: Int64?
        var firstSeq: Int64?
        var isFirstPage = true
        var more = false
        repeat {
            let limit = min(100, window.itemLimit - items.count)
            let result = try await queryWithSession(window.query, page, limit: limit)
            if isFirstPage { firstSeq = result.seq }
            isFirstPage = false
            count = result.count
            seq = result.seq
            switch window.anchor {
            case .first:
                items += result.items
                more = result.nextCursor != nil
                if let last = items.last { page = .after(window.query.position(of: last)) }
            case .last:
                items = result.items + items
                more = result.previousCursor != nil
                if let first = items.first { page = .before(window.query.position(of: first)) }
            }
        } while more && items.count < window.itemLimit
        return (items, count, window.anchor == .first && more, window.anchor == .last && more, seq, firstSeq)
    }

    func queryWithSession(_ query: CollectionQuery, _ page: PageRequest, limit: Int) async throws(LiveError) -> QueryPage {
        let token = try await session.accessToken()
        do {
            return try await cloud.query(query, page, limit: limit, token: token)
        } catch  where error.code == .unauthenticated {
            await session.tokenRejected(token)
            return try await cloud.query(query, page, limit: limit, token: try await session.accessToken())
        }
    }

    func releaseCollectionIfUnobserved(_ window: CollectionWindow) async {
        guard let observation = collectionWindows.observations[window], observation.isUnobserved else { return }
        if !collectionWindows.catchingUp.contains(window) { await storeWindow(window, observation) }
        collectionWindows.observations[window] = nil
        collectionWindows.countedThrough[window] = nil
        collectionWindows.catchingUp.remove(window)
        askForEviction(.released)
        await realtime.release(.collection(window.query.collection))
        // The query's result index goes with its last window.
        if !collectionWindows.observations.keys.contains(where: { $0.query == window.query }),
            let index = collectionWindows.resultIndexes.removeValue(forKey: window.query)
        {
            await index.close()
            await realtime.release(.collection(window.query.collection))
        }
    }

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
    private func windowChanged(
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

/// A live collection: a query's result, in pages, kept current.
public struct LiveCollection: Sendable {
    let client: LiveClient
    public let window: CollectionWindow

    /// Observes the collection until the returned token is invalidated or released. The first emission
    /// carries the whole window as insertions; each later one the change since the previous.
    ///
    /// The handler is called serially, on the engine's executor; it must return quickly.
    ///
    /// - Parameter fields: only the top-level fields this observer cares about: a change that only modifies
    ///   other fields of the window's objects is not delivered to it, and its modifications list only the
    ///   objects where one of these changed (insertions, deletions, moves and statuses always arrive). The
    ///   filter is this observer's own.
    public func observe(fields: Set<String>? = nil, _ handler: @escaping @Sendable (LiveCollectionChange) -> Void) async -> LiveCollectionToken {
        await client.observeCollection(window, once: false, fields: fields, handler: handler)
    }

    /// Observes exactly one emission: the cached result if there is one, else the fetch's outcome.
    public func observeOnce(_ handler: @escaping @Sendable (LiveCollectionChange) -> Void) async -> LiveCollectionToken {
        await client.observeCollection(window, once: true, handler: handler)
    }
}

/// Whether an observer may still be called; shared by its token and its handler.
final class ObserverLiveness: Sendable {
    private let alive = Atomic<Bool>(true)
    var isAlive: Bool { alive.load(ordering: .acquiring) }
    func end() { alive.store(false, ordering: .releasing) }
}

/// Keeps a collection observation alive and pages it. ``invalidate()`` ends it; so does releasing the token.
///
/// Invalidation is idempotent and thread-safe; once `invalidate()` returns, the observer is not called again
/// (a call already running may finish).
public final class LiveCollectionToken: Sendable {
    private let client: LiveClient
    let observer: Int
    let liveness = ObserverLiveness()
    private let state: Mutex<(window: CollectionWindow, observation: SharedCollectionObservation)>

    init(client: LiveClient, observer: Int, window: CollectionWindow, observation: SharedCollectionObservation) {
        self.client = client
        self.observer = observer
        self.state = Mutex((window, observation))
    }

    /// The window the observer is on now (its `pages` grows with paging).
    public var window: CollectionWindow { state.withLock { $0.window } }
    public var isInvalidated: Bool { !liveness.isAlive }

    func moved(to window: CollectionWindow, observation: SharedCollectionObservation) {
        state.withLock { $0 = (window, observation) }
    }

    /// Extends the window by one page towards the end (a `.first`-anchored window). False when there is none.
    public func nextPage() async -> Bool { await client.movePage(self, .next) }
    /// Extends the window by one page towards the start (a `.last`-anchored window). False when there is none.
    public func previousPage() async -> Bool { await client.movePage(self, .previous) }
    /// Back to one page. False when the window holds one page already.
    public func resetPage() async -> Bool { await client.movePage(self, .reset) }

    /// The window's state now (what the observer last received).
    public var current: LiveCollectionChange { state.withLock { $0.observation.current } }

    // MARK: The whole result by index, from the cache

    /// The object at `index` of the query's whole result (not just the window), read from the cache: the
    /// result is fetched into the cache a page of 100 at a time as far as reads reach, and kept current by
    /// realtime changes while the query is observed, so memory does not grow with the result's size.
    /// `nil` past the end.
    public func object(at index: Int) async throws(LiveError) -> Entity? {
        try await objects(in: index..<(index + 1)).first
    }

    /// The objects at `range` of the query's whole result, in order (fewer when the result ends before),
    /// read from the cache as ``object(at:)`` reads.
    public func objects(in range: Range<Int>) async throws(LiveError) -> [Entity] {
        guard range.lowerBound >= 0 else { throw LiveError(code: .invalidArgument, message: "an index must be 0 or more") }
        return try await resultIndex().objects(in: range)
    }

    /// The objects at `range` of the query's whole result, as ``objects(in:)`` reads them, with the result's
    /// count as ``resultCount()`` gives it, both from one state of the result (one read of the cache).
    public func objectsAndCount(in range: Range<Int>) async throws(LiveError) -> (objects: [Entity], count: Int) {
        guard range.lowerBound >= 0 else { throw LiveError(code: .invalidArgument, message: "an index must be 0 or more") }
        return try await resultIndex().objectsAndCount(in: range)
    }

    /// The query's whole result, in order (in memory: use ``objects(in:)`` for a large one).
    public func allObjects() async throws(LiveError) -> [Entity] {
        try await resultIndex().allObjects()
    }

    /// How many objects match the query in all (the cloud's count, kept current; exact once the whole
    /// result has been read).
    public func resultCount() async throws(LiveError) -> Int {
        try await resultIndex().count()
    }

    private func resultIndex() async throws(LiveError) -> ResultIndex {
        guard liveness.isAlive else { throw LiveError(code: .invalidArgument, message: "the collection token was invalidated") }
        return await client.resultIndex(window.query)
    }

    /// Ends the observation. Idempotent.
    public func invalidate() {
        guard liveness.isAlive else { return }
        liveness.end()
        let (window, observation) = state.withLock { ($0.window, $0.observation) }
        observation.remove(observer)
        if observation.isUnobserved { client.commandSink.yield(.releaseCollection(window)) }
    }

    deinit { invalidate() }
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
