// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// A query's whole result, read by index from the cache (``CacheStore`` `resultItem`), filled from the cloud
/// a page of 100 at a time as far as reads reach, and kept current by the collection's realtime changes
/// while it is open: memory does not grow with the result's size.
///
/// Opened for a query when one of its collection tokens first reads by index; it holds the collection's
/// realtime topic (so no change falls between a fill and the changes applied to it) and starts empty, since
/// changes made while it was closed were not seen. A resync of the topic empties it again; an entity of it
/// evicted from the cache makes it start again too.
package actor ResultIndex {
    package enum Event: Sendable {
        /// A change of this object (applied as the cache holds the object when it is applied).
        case changed(Entity)
        /// Continuity with the cloud was lost: start again from the first page.
        case reset
    }

    package typealias FetchPage = @Sendable (PageRequest, Int) async throws(LiveError) -> QueryPage

    package nonisolated let query: CollectionQuery
    private let key: String
    private let cache: CacheStore
    private let fetchPage: FetchPage
    private let events: AsyncStream<Event>.Continuation
    private let prepared: Task<Void, any Error>
    private var consumer: Task<Void, Never>?
    /// Changes seen while a page is being fetched: applied again over it once stored.
    private var changesDuringFill: [Entity]?
    private var fillInProgress: Task<Void, any Error>?
    /// How many times the index started again (resync, eviction), for tests and logs.
    package private(set) var resets = 0

    /// - Parameters:
    ///   - acquireTopic: takes a reference on the collection's realtime topic (returning once subscribed).
    package init(query: CollectionQuery, cache: CacheStore, acquireTopic: @escaping @Sendable () async -> Void, fetchPage: @escaping FetchPage) {
        self.query = query
        key = query.canonicalText
        self.cache = cache
        self.fetchPage = fetchPage
        let (stream, sink) = AsyncStream.makeStream(of: Event.self)
        events = sink
        let key = key
        let prepared = Task {
            await acquireTopic()
            try await cache.resetResultIndex(key)
        }
        self.prepared = prepared
        Task { await self.consume(stream) }
    }

    /// A change of the collection (as the cache now holds it), or a reset; applied in order.
    package nonisolated func enqueue(_ event: Event) { events.yield(event) }

    /// Stops applying changes and forgets the index (its topic reference is released by the caller).
    package func close() async {
        events.finish()
        try? await cache.dropResultIndex(key)
    }

    private func consume(_ stream: AsyncStream<Event>) async {
        _ = try? await prepared.value
        for await event in stream {
            do {
                switch event {
                case .changed(let entity):
                    changesDuringFill?.append(entity)
                    if try await cache.applyToResultIndex(key, query, entity) == .entityMissing { try await reset() }
                case .reset:
                    try await reset()
                }
            } catch {
                try? await reset()  // a failed cache write: do not serve what may now be wrong
            }
        }
    }

    private func reset() async throws(LiveError) {
        resets += 1
        try await cache.resetResultIndex(key)
    }

    // MARK: Reading

    /// How many objects match the query (the cloud's count as of the first page, adjusted by the changes
    /// seen since; exact once the whole result is in the index).
    package func count() async throws(LiveError) -> Int {
        // Read with the first item, in one state of the index: a reset that empties it after the fill looked
        // sends the read to fill again (answered from the emptied state, a count of 0 would pass for the
        // result's: a C client read a result of four as four items of 0).
        try await objectsAndCount(in: 0..<1).count
    }

    /// The objects at `positions` of the result (fewer when it ends before), in order.
    package func objects(in positions: Range<Int>) async throws(LiveError) -> [Entity] {
        guard !positions.isEmpty else { return [] }
        return try await objectsAndCount(in: positions).objects
    }

    /// The objects at `positions` of the result (fewer when it ends before), in order, and the result's count,
    /// both from one state of the index: a change applied between two separate reads cannot put an object in
    /// one and leave it out of the other.
    package func objectsAndCount(in positions: Range<Int>) async throws(LiveError) -> (objects: [Entity], count: Int) {
        // An empty range reads no item, and so proves nothing filled: the count's own read answers.
        guard !positions.isEmpty else { return ([], try await count()) }
        for _ in 0..<5 {
            let generation = resets
            try await fill(upTo: positions.upperBound)
            // Read in one transaction with how far the index reaches: emptied since the fill (a resync: the
            // realtime link came up after the index opened) or shortened by a change, it is filled again.
            switch try await cache.resultItems(key, collection: query.collection, positions) {
            case .items(let items, let count) where resets == generation: return (items, count)
            case .items, .short: continue
            case .entityMissing: try await reset()
            }
        }
        throw LiveError(
            code: .cacheFailure,
            message: "the result index was emptied at every read (resyncs, or the cache evicting its objects: raise cache-max-entities)"
        )
    }

    /// The whole result (this one holds it in memory: that is what it is asked for).
    package func allObjects() async throws(LiveError) -> [Entity] {
        try await objects(in: 0..<Int.max)
    }

    /// Fetches pages after the index's last item until it holds `count` items or the whole result. One fill
    /// at a time: a reader arriving meanwhile waits for it, then looks again.
    private func fill(upTo count: Int) async throws(LiveError) {
        do {
            try await prepared.value
            while true {
                if let running = fillInProgress {
                    // Cleared here too: its starter may not have run again yet, and a finished task's value
                    // returns without suspending, so waiting on it again would spin on the actor.
                    defer { if fillInProgress == running { fillInProgress = nil } }
                    try await running.value
                    continue
                }
                let state = try await cache.resultIndexState(key)
                if state.filled >= count || state.complete { return }
                let page = Task { try await self.fillPage() }
                fillInProgress = page
                defer { if fillInProgress == page { fillInProgress = nil } }
                try await page.value
            }
        } catch let error as LiveError {
            throw error
        } catch {
            throw LiveError(code: .cacheFailure, message: "filling the result index of \(query.canonicalText) failed: \(error)")
        }
    }

    private func fillPage() async throws(LiveError) {
        let generation = resets
        let last = try await cache.lastResultPosition(key)
        changesDuringFill = []
        defer { changesDuringFill = nil }
        let page = try await fetchPage(last.map { .after($0) } ?? .first, 100)
        // A reset while the page was on its way (continuity lost: the page may predate changes never seen),
        // or an index that no longer ends where the page starts (emptied, or its last item left): the page
        // is not stored, and the fill looks again. Appended after the wrong item, it would stay wrong.
        guard resets == generation,
            try await cache.appendResultPage(key, query, after: last, page.items, complete: page.nextCursor == nil, count: page.count)
        else { return }
        // A change applied while the page was on its way may be older than the page, or the page older than
        // it: applying it again puts the object where the cache's newest version of it belongs.
        for entity in changesDuringFill ?? [] {
            if try await cache.applyToResultIndex(key, query, entity) == .entityMissing { try await reset() }
        }
    }
}
