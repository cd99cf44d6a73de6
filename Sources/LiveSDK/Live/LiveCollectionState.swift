// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveJSON

/// Which end of a query's result a collection window starts from.
public enum CollectionAnchor: String, Sendable, Codable, Hashable {
    /// The first page; `nextPage` extends the window towards the end.
    case first
    /// The last page (a chat's newest messages, with an ascending sort); `previousPage` extends it backwards.
    case last
}

/// What a shared collection observation is: a query, a page size, an anchor and how many pages the window
/// holds. Observers of equal windows share one observation (one fetch, one realtime topic, one change set
/// per update); paging moves an observer to the window with one page more (or back to one page).
public struct CollectionWindow: Hashable, Sendable {
    public var query: CollectionQuery
    public var pageSize: Int
    public var anchor: CollectionAnchor
    public var pages: Int

    public init(query: CollectionQuery, pageSize: Int = 20, anchor: CollectionAnchor = .first, pages: Int = 1) {
        self.query = query
        self.pageSize = pageSize
        self.anchor = anchor
        self.pages = pages
    }

    /// How many items a fetch of the window asks for.
    public var itemLimit: Int { pageSize * pages }

    /// A stable name for the cache.
    var cacheKey: String { "\(query.canonicalText)|\(pageSize)|\(anchor.rawValue)|\(pages)" }

    /// Whether a stored result may be shown as this window's first state: every id it stored still has its
    /// entity in the cache, and the entities that still match the query (the ones shown: the cache's copies
    /// may be newer than the result) reach into its last page unless it holds the rest of the result. A
    /// window of several pages is never shown as fewer pages while more are owed; it starts loading instead.
    package func holdsItsPages(_ stored: CacheStore.QueryResult, entities: [Entity]) -> Bool {
        guard entities.count == stored.ids.count else { return false }
        let more = anchor == .first ? stored.hasNext : stored.hasPrevious
        return !more || entities.lazy.filter(query.matches).count > (pages - 1) * pageSize
    }
}

/// What an observer of a live collection receives: the window's items (frozen snapshots, in order), how
/// they changed since the observer's previous emission, and the statuses.
public struct LiveCollectionChange: Sendable, Equatable {
    /// The window's items, in the query's order.
    public var items: [Entity]
    /// From the observer's previous emission to this one (from empty for its first).
    public var changes: ChangeSet
    /// How many objects match the query in all (exact when the window holds the whole result; otherwise as
    /// of the last fetch, adjusted by the changes seen since).
    public var count: Int
    public var hasNext: Bool
    public var hasPrevious: Bool
    /// `notExist` until a result is known (from the cache or the cloud), then `local` or `fresh`, or `error`.
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: LiveError?
    /// A resync notice: continuity with the cloud was lost; the full state follows.
    public var resync: Bool
    /// Identifies this emission: every observer that receives the same change gets the same value (a
    /// consumer can encode it once for all of them); no two different changes share one.
    public var emission: Int
    /// The ids of the window's items that include writes of this host the cloud has not confirmed yet
    /// (their version is the confirmed one; 0 for an object not created yet).
    public var pendingIDs: Set<String> = []

    public init(
        items: [Entity],
        changes: ChangeSet,
        count: Int,
        hasNext: Bool,
        hasPrevious: Bool,
        dataStatus: DataStatus,
        loadingStatus: LoadingStatus,
        error: LiveError? = nil,
        resync: Bool = false,
        emission: Int = 0
    ) {
        self.items = items
        self.changes = changes
        self.count = count
        self.hasNext = hasNext
        self.hasPrevious = hasPrevious
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.error = error
        self.resync = resync
        self.emission = emission
    }

    /// Whether the statuses, the count and the paging flags are those of `other` (items and changes aside).
    func hasSameStatuses(as other: LiveCollectionChange) -> Bool {
        dataStatus == other.dataStatus && loadingStatus == other.loadingStatus && error == other.error && count == other.count
            && hasNext == other.hasNext && hasPrevious == other.hasPrevious
    }

    /// The change from `old` to `self`, as an observer that saw `old` must receive it.
    func relative(to old: [Entity]) -> LiveCollectionChange {
        var change = self
        change.changes = LiveCollectionState.changes(from: old, to: items)
        return change
    }
}

/// The state machine of one collection window. Pure: events in, the change to emit (if any) out.
///
/// Emissions follow the object's order: the cached result with `local`/`loading` (or nothing known,
/// `notExist`/`loading`), then the fetch's outcome (`fresh`/`loaded`, or the kept items with
/// `loadingStatus: error`), then one emission per realtime change that alters the window. An emission is
/// made only when the items (ids or versions) or the statuses changed.
///
/// Realtime changes land at their sorted place when that place is inside the window; a change past the
/// window's end while more pages follow (or before its start while earlier pages exist) is not in the window.
/// Changes that stop matching leave; deletions leave.
public struct LiveCollectionState: Sendable {
    public let window: CollectionWindow
    /// What observers see: `confirmed` with the pending writes placed over it.
    public private(set) var current: LiveCollectionChange
    public private(set) var hasStarted = false
    /// The window as the cloud confirmed it.
    private var confirmed: LiveCollectionChange
    /// Writes of this host not yet confirmed, by object id: the object as they make it (`nil`: deleted).
    private var pending: [String: Entity?] = [:]
    /// Resuming from a stored result: the replayed changes apply silently until ``caughtUp()``.
    private var catchingUp = false
    /// The count said nothing lies beyond a window whose edge says something does: a fetch settles it.
    private var countDoubted = false

    /// The window as the cloud confirmed it (no pending writes over it): what the cache stores.
    public var confirmedWindow: LiveCollectionChange { confirmed }

    public init(window: CollectionWindow) {
        self.window = window
        current = LiveCollectionChange(
            items: [],
            changes: ChangeSet(),
            count: 0,
            hasNext: false,
            hasPrevious: false,
            dataStatus: .notExist,
            loadingStatus: .notLoading
        )
        confirmed = current
    }

    /// A window seeded from another one's state (paging): the same items and statuses, no emission.
    init(window: CollectionWindow, seed: LiveCollectionChange) {
        self.window = window
        current = seed
        current.changes = ChangeSet()
        current.resync = false
        current.pendingIDs = []
        confirmed = current
        hasStarted = true
    }

    /// Items compare whole: a pending write changes the data under the same version.
    static func changes(from old: [Entity], to new: [Entity]) -> ChangeSet {
        ChangeSet.between(old: old.map(\.id), new: new.map(\.id)) { old[$0] != new[$1] }
    }

    /// The object `id` as this host's unconfirmed writes make it (`.some(nil)`: deleted), or `nil` when no
    /// write of it is pending any more. Observers see it at its sorted place, marked in `pendingIDs`.
    public mutating func pendingChanged(_ id: String, _ overlay: Entity??) -> LiveCollectionChange? {
        if let overlay { pending[id] = overlay } else { pending[id] = nil }
        guard hasStarted else { return nil }
        return emit(confirmed)
    }

    /// Where `entity` goes in `items` (sorted by the query), or `nil` when that place is outside the window.
    private func place(_ entity: Entity, in items: [Entity], hasNext: Bool, hasPrevious: Bool) -> Int? {
        let query = window.query
        let position = query.position(of: entity)
        var low = 0
        var high = items.count
        while low < high {
            let middle = (low + high) / 2
            if query.areInIncreasingOrder(query.position(of: items[middle]), position) { low = middle + 1 } else { high = middle }
        }
        return (low > 0 || !hasPrevious) && (low < items.count || !hasNext) ? low : nil
    }

    /// Makes `base` the confirmed state, and emits it with the pending writes placed over it when that
    /// differs from what observers saw (or `force`).
    private mutating func emit(_ base: LiveCollectionChange, force: Bool = false) -> LiveCollectionChange? {
        confirmed = base
        confirmed.changes = ChangeSet()
        confirmed.resync = false
        var next = base
        next.pendingIDs = []
        for (id, overlay) in pending.sorted(by: { $0.key < $1.key }) {
            next.items.removeAll { $0.id == id }
            guard let entity = overlay else { continue }
            if window.query.matches(entity), let index = place(entity, in: next.items, hasNext: next.hasNext, hasPrevious: next.hasPrevious) {
                next.items.insert(entity, at: index)
                next.pendingIDs.insert(id)
            }
        }
        if trimToItsPages(&next) { next.pendingIDs.formIntersection(next.items.map(\.id)) }
        next.changes = Self.changes(from: current.items, to: next.items)
        guard force || !next.hasSameStatuses(as: current) || !next.changes.isEmpty || next.resync || next.pendingIDs != current.pendingIDs else {
            return nil
        }
        current = next
        let emitted = current
        current.resync = false
        return emitted
    }

    /// The observation starts, from the cached result if there is one.
    ///
    /// The cached result is its ids with the cache's newest copy of each object, which may be newer than the
    /// result (the object's topic, or another window, stored it since): they are put back in the query's order,
    /// and those that no longer match leave, so that even the cached window is one the query could give.
    public mutating func started(cached: (items: [Entity], count: Int, hasNext: Bool, hasPrevious: Bool)?, fetching: Bool)
        -> LiveCollectionChange?
    {
        hasStarted = true
        var next = confirmed
        if let cached {
            let query = window.query
            next.items = cached.items.filter(query.matches).sorted {
                query.areInIncreasingOrder(query.position(of: $0), query.position(of: $1))
            }
            next.count = cached.count
            next.hasNext = cached.hasNext
            next.hasPrevious = cached.hasPrevious
            next.dataStatus = .local
            keepToItsPages(&next)
        }
        next.loadingStatus = fetching ? .loading : .notLoading
        return emit(next, force: true)
    }

    /// The collection's topic is resuming from the stored result's sequence number: the replayed changes
    /// apply to the window without an emission, and ``caughtUp()`` emits the outcome once, in a fetch's place.
    public mutating func resumeStarted() {
        catchingUp = true
    }

    /// The replay is over: the window is as fresh as a fetch would make it.
    public mutating func caughtUp() -> LiveCollectionChange? {
        catchingUp = false
        var next = confirmed
        next.dataStatus = .fresh
        next.loadingStatus = .loaded
        next.error = nil
        return emit(next)
    }

    /// The resumption did not happen (the cloud could not replay): a fetch follows, as without a stored result.
    public mutating func resumeAbandoned() {
        catchingUp = false
    }

    public mutating func fetchStarted() -> LiveCollectionChange? {
        var next = confirmed
        next.loadingStatus = .loading
        return emit(next)
    }

    /// A fetch's outcome, with the realtime changes that arrived while it ran applied over it (a fetch that
    /// read older data never wins over a newer event): one emission, so observers never see the older data.
    public mutating func fetchSucceeded(
        items: [Entity],
        count: Int,
        hasNext: Bool,
        hasPrevious: Bool,
        changedMeanwhile: [(entity: Entity, previous: JSONValue??, placing: Bool)] = []
    ) -> LiveCollectionChange? {
        var next = confirmed
        next.items = items
        next.count = count
        next.hasNext = hasNext
        next.hasPrevious = hasPrevious
        next.dataStatus = .fresh
        next.loadingStatus = .loaded
        next.error = nil
        countDoubted = false
        guard !changedMeanwhile.isEmpty else {
            keepToItsPages(&next)
            return emit(next)
        }
        let wasCatchingUp = catchingUp
        catchingUp = true
        confirmed = next
        for change in changedMeanwhile { _ = remoteChanged(change.entity, previous: change.previous, placing: change.placing) }
        var caughtUp = confirmed
        keepToItsPages(&caughtUp)
        catchingUp = wasCatchingUp
        return emit(caughtUp)
    }

    /// Whether a change heard while a fetch ran places its object over the fetch's items (``fetchSucceeded(items:count:hasNext:hasPrevious:changedMeanwhile:)``):
    /// not when the cache held a newer copy (`placing` false), nor when the fetch's read (as of event `readAt`)
    /// came after it (event `seq`) — the read holds the object as of then, or later — unless the items hold an
    /// older copy of it (`heldVersions`, by id): one the read did not hold, kept from before, as a page beyond
    /// the window keeps the items it had. So no change is dropped and no older copy stays.
    public static func placesOverFetch(
        _ entity: Entity,
        placing: Bool,
        seq: Int64?,
        readAt: Int64?,
        heldVersions: [String: Int64]
    ) -> Bool {
        guard placing else { return false }
        guard let seq, let readAt, seq <= readAt else { return true }
        return heldVersions[entity.id].map { $0 < entity.version } ?? false
    }

    public mutating func fetchFailed(_ error: LiveError) -> LiveCollectionChange? {
        var next = confirmed
        next.loadingStatus = .error
        next.error = error
        // No longer fresh when the cloud refused to let it be read (a permission was revoked).
        if next.dataStatus == .notExist || error.code == .notPermitted { next.dataStatus = .error }
        return emit(next)
    }

    /// Continuity with the cloud was lost: a resync notice (with `loading`); the refetch's outcome follows.
    public mutating func resyncStarted() -> LiveCollectionChange? {
        // No notice when the last load failed: observers were told then that the window is not known to be
        // current, and the fetch's outcome follows all the same.
        guard confirmed.loadingStatus != .error else { return nil }
        var next = confirmed
        next.loadingStatus = .loading
        next.resync = true
        return emit(next)
    }

    /// A realtime change of an entity of the collection.
    ///
    /// - Parameter previous: for an event of the collection's topic (heard once per write, in order), the
    ///   object's data before the write (`.some(nil)`: it did not exist): whether the write made it join or
    ///   leave the query's result, beyond the window too, keeps `count` exact. `nil` for the same write heard
    ///   again (on its object topic, or as a write's confirmation): it only places the entity.
    /// - Parameter placing: `false` for a copy older than one already seen (by the engine, beyond this window):
    ///   it is only counted.
    public mutating func remoteChanged(_ entity: Entity, previous: JSONValue?? = nil, placing: Bool = true) -> LiveCollectionChange? {
        guard hasStarted, entity.collection == window.query.collection else { return nil }
        let query = window.query
        var next = confirmed
        let wasWhole = !next.hasNext && !next.hasPrevious
        let oldIndex = next.items.firstIndex { $0.id == entity.id }
        let isNews = placing && (oldIndex.map { next.items[$0].version < entity.version } ?? true)
        if isNews {
            if let oldIndex { next.items.remove(at: oldIndex) }
            if query.matches(entity), let index = place(entity, in: next.items, hasNext: next.hasNext, hasPrevious: next.hasPrevious) {
                next.items.insert(entity, at: index)
            }
        }
        if let previous {
            next.count += Self.countChange(of: query, entity, previous: previous)
        } else if !isNews {
            return nil
        }
        keepToItsPages(&next, counted: previous != nil)
        if wasWhole, next.hasNext || next.hasPrevious {
            // A window holding the whole result counts its items, so the writes placed in it uncounted (heard on
            // their object topic first, or as this host's confirmations) were counted already: this one, when it
            // is uncounted, and any placed before it, whatever this one is. Their collection topic events, still
            // to come, will count them again now that the window holds part of the result only. Only a fetch
            // can tell the count (``needsRefill``).
            countDoubted = true
            if previous == nil { next.count = max(next.count, next.items.count + 1) }
        }
        if catchingUp {
            confirmed = next
            confirmed.changes = ChangeSet()
            return nil
        }
        return emit(next)
    }

    /// How a write changes the number of objects matching `query`: +1 when `entity` joined the result, -1
    /// when it left (deletions included), 0 otherwise. `previous`: its data before the write.
    public static func countChange(of query: CollectionQuery, _ entity: Entity, previous: JSONValue?) -> Int {
        var before = entity
        before.deleted = previous == nil
        before.data = previous ?? [:]
        return (query.matches(entity) ? 1 : 0) - (query.matches(before) ? 1 : 0)
    }

    /// Whether the window holds fewer items than its pages while more of the result lies beyond (items left
    /// it): a fetch of the window refills it.
    public var needsRefill: Bool {
        guard confirmed.hasNext || confirmed.hasPrevious else { return false }
        return confirmed.items.count < window.itemLimit || countDoubted
    }

    /// Drops the items past the window's pages (from its far end: more then follows). Returns whether it did.
    @discardableResult
    private func trimToItsPages(_ change: inout LiveCollectionChange) -> Bool {
        let excess = change.items.count - window.itemLimit
        guard excess > 0 else { return false }
        switch window.anchor {
        case .first:
            change.items.removeLast(excess)
            change.hasNext = true
        case .last:
            change.items.removeFirst(excess)
            change.hasPrevious = true
        }
        return true
    }

    /// A window holds its pages' worth of the result, no more: an item that arrived pushes the farthest one
    /// out (more then follows); when it holds the whole result, `count` is its size and nothing follows.
    ///
    /// - Parameter counted: whether `count` is as of this change. A write heard first on its object topic
    ///   (or as a confirmation) is placed before its collection topic's event counts it: until then, the
    ///   count of a window holding part of the result does not decide whether more follows.
    private mutating func keepToItsPages(_ change: inout LiveCollectionChange, counted: Bool = true) {
        trimToItsPages(&change)
        if change.hasNext || change.hasPrevious {
            // A count that says nothing lies beyond, while the window's edge says something does: one of them
            // is wrong, and only a fetch can tell (``needsRefill``).
            if counted, change.count <= change.items.count {
                countDoubted = true
                change.count = change.items.count + 1
            }
        } else {
            change.count = change.items.count
        }
    }
}
