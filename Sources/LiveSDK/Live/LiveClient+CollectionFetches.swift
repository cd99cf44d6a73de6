// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

// Collection windows' reads: activation (a fetch, or a resumption from a stored result), refreshes, paging
// further, storing, and release.
extension LiveClient {
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
        var read = WindowPagesRead(anchor: window.anchor)
        var page: PageRequest = window.anchor == .first ? .first : .last
        var count = 0
        var seq: Int64?
        var firstSeq: Int64?
        var isFirstPage = true
        var more = false
        repeat {
            let limit = min(100, window.itemLimit - read.items.count)
            let result = try await queryWithSession(window.query, page, limit: limit)
            if isFirstPage { firstSeq = result.seq }
            isFirstPage = false
            count = result.count
            seq = result.seq
            read.add(result.items)
            switch window.anchor {
            case .first:
                more = result.nextCursor != nil
                if let last = result.items.last { page = .after(window.query.position(of: last)) }
            case .last:
                more = result.previousCursor != nil
                if let first = result.items.first { page = .before(window.query.position(of: first)) }
            }
        } while more && read.items.count < window.itemLimit
        return (read.items, count, window.anchor == .first && more, window.anchor == .last && more, seq, firstSeq)
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
}
