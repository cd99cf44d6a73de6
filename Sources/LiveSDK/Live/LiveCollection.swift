// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging
import Synchronization

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
