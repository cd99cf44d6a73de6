// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON

/// Where an observation's data comes from.
public enum DataStatus: String, Sendable, Codable {
    /// There is no such object, as far as the engine knows.
    case notExist
    /// From the local cache; a fresh copy may follow.
    case local
    /// Confirmed by the cloud and kept current by realtime events.
    case fresh
    /// The data could not be obtained and nothing is cached.
    case error
}

/// What the engine is doing to get fresh data for an observation.
public enum LoadingStatus: String, Sendable, Codable {
    case notLoading
    case loading
    case loaded
    case error
}

/// What an observer of a live object receives: a frozen snapshot and the statuses, together.
///
/// A snapshot never changes after delivery; a later version is a new value. Statuses are part of the same
/// value, so an observer always sees them consistent with the data they describe.
///
/// The snapshot and the error are held by reference (each in an immutable box), so a change is 24 bytes and a
/// copy counts two references: every observed object keeps two changes, and the fan-out copies each change per
/// event loop and per token (Benchmarks.md, memory per observed object).
public struct LiveObjectChange: Sendable, Equatable {
    private var snapshotBox: Frozen<Entity>?
    private var errorBox: Frozen<LiveError>?
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    /// A resync notice: the engine cannot prove it saw every change since the previous emission (the
    /// realtime link was down and the cloud could not replay what was missed). The full state follows in
    /// the next emission. Set on this one change only.
    public var resync: Bool
    /// The snapshot includes writes made on this host that the cloud has not confirmed yet (Firestore's
    /// `hasPendingWrites`). Its `version` is then the confirmed version those writes apply to; the
    /// confirmation brings the cloud's version, a rejection the confirmed data back (with `error` set).
    public var pendingWrites: Bool

    /// The object, or `nil` when it does not exist (or could not be loaded and nothing is cached).
    public var snapshot: Entity? {
        get { snapshotBox?.value }
        set { snapshotBox = newValue.map(Frozen.init) }
    }

    public var error: LiveError? {
        get { errorBox?.value }
        set { errorBox = newValue.map(Frozen.init) }
    }

    /// The snapshot's version, read in place (no copy of the snapshot).
    public var version: Int64? { snapshotBox?.value.version }

    /// Whether there is a snapshot, read in place.
    public var hasSnapshot: Bool { snapshotBox != nil }

    /// Whether there is an error, read in place.
    public var hasError: Bool { errorBox != nil }

    public init(
        snapshot: Entity?,
        dataStatus: DataStatus,
        loadingStatus: LoadingStatus,
        error: LiveError? = nil,
        resync: Bool = false,
        pendingWrites: Bool = false
    ) {
        self.snapshotBox = snapshot.map(Frozen.init)
        self.errorBox = error.map(Frozen.init)
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.resync = resync
        self.pendingWrites = pendingWrites
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.dataStatus == rhs.dataStatus && lhs.loadingStatus == rhs.loadingStatus && lhs.resync == rhs.resync
            && lhs.pendingWrites == rhs.pendingWrites && Frozen.same(lhs.snapshotBox, rhs.snapshotBox)
            && Frozen.same(lhs.errorBox, rhs.errorBox)
    }
}

/// An immutable value on the heap: copies of what holds it share it.
final class Frozen<Value: Sendable & Equatable>: Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }

    /// Whether two boxes hold equal values (the same box, or none in both, at once).
    static func same(_ lhs: Frozen?, _ rhs: Frozen?) -> Bool {
        switch (lhs, rhs) {
        case (nil, nil): true
        case let (lhs?, rhs?): lhs === rhs || lhs.value == rhs.value
        default: false
        }
    }
}

/// How a write changes an object.
public enum LiveWrite: Sendable, Equatable {
    /// Create or replace the data (a JSON object).
    case replace(JSONValue)
    /// Merge a JSON merge patch (RFC 7386): members replace, `null` members are removed.
    case merge(JSONValue)
    /// Delete the object; observers see `notExist`.
    case delete

    /// What the object looks like after this write, applied locally to `base` (the confirmed state, or the
    /// state after earlier pending writes): `nil` when it no longer exists. The version stays `base`'s; an
    /// object created where none exists gets `confirmedVersion`, the version of its deletion (0 when it never
    /// existed), so that versions never go back.
    func applied(to base: Entity?, key: EntityKey, confirmedVersion: Int64) -> Entity? {
        switch self {
        case .delete:
            return nil
        case .replace(let data):
            var entity =
                base ?? Entity(collection: key.collection, id: key.id, version: confirmedVersion, data: data, createdAt: "", updatedAt: "")
            entity.data = data
            entity.deleted = false
            return entity
        case .merge(let patch):
            guard var entity = base else { return nil }  // the cloud will refuse it: nothing to merge into
            entity.data = entity.data.merging(patch: patch)
            return entity
        }
    }
}

/// The status machine of one observed object. Pure: events in, the change to emit (if any) out.
///
/// The order of emissions is fixed:
/// 1. `started`: the cached version with `local`/`loading`, or `notExist`/`loading` when nothing is cached.
///    (After a loss of continuity, a `resync` notice with `loading` takes this place, and 2. follows.)
/// 2. The fetch's outcome: `fresh`/`loaded` (or `notExist`/`loaded`), or the kept data with `loadingStatus: error`.
///    (When the subscription resumed from the cache's checkpoint, the replay's outcome takes its place, once.)
/// 3. Each realtime change with a higher version: `fresh`/`loaded` with the new snapshot.
///
/// A snapshot with a lower version than one already emitted is never emitted, and nothing is emitted when
/// neither data nor statuses changed.
///
/// Writes made on this host show at once (``localWrite(_:_:)``): the emitted snapshot is the confirmed
/// state with the pending writes applied in order, marked ``LiveObjectChange/pendingWrites``. Events above
/// change the confirmed state; the pending writes stay applied over it until each is confirmed (its
/// entity becomes the confirmed state) or rejected (it is dropped, and the error is emitted with the
/// state without it).
public struct LiveObjectState: Sendable {
    /// What observers see: `confirmed` with the pending writes applied.
    public var current: LiveObjectChange { shown?.change ?? confirmed }
    /// The state as the cloud confirmed it.
    private var confirmed: LiveObjectChange
    /// `current` when it is not `confirmed` (writes pending, a rejection's error, changes replayed silently
    /// until a catch-up). Most of the time it is, so the second copy is kept only when it differs.
    private var shown: Shown?
    /// Writes of this host not yet confirmed, in the order they were made, by outbox id.
    public private(set) var pending: [(id: Int64, write: LiveWrite)] = []
    private var key: EntityKey?
    /// The highest version seen (a deleted object keeps its last version, so stale answers stay ignored).
    private var knownVersion: Int64 = 0
    private var eventSinceFetchStarted = false
    /// Resuming from a checkpoint: replayed changes update the state silently until ``caughtUp()``, which
    /// emits the result once (as a fetch's outcome would be).
    private var catchingUp = false
    public private(set) var hasStarted = false

    public init(key: EntityKey? = nil) {
        confirmed = LiveObjectChange(snapshot: nil, dataStatus: .notExist, loadingStatus: .notLoading)
        self.key = key
    }

    /// A write of this host, durably queued under `id`: observers see it at once, marked pending (once the
    /// observation has started: before, with its start).
    public mutating func localWrite(_ id: Int64, _ write: LiveWrite) -> LiveObjectChange? {
        guard !pending.contains(where: { $0.id == id }) else { return nil }  // told twice (outbox read and enqueue)
        pending.append((id, write))
        // Not started, nothing is shown yet: the start shows the write over what the cache holds. Shown now, it
        // would be over nothing known (a merge as `notExist`/`notLoading`, an object that exists looking deleted).
        guard hasStarted else { return nil }
        return commit(confirmed)
    }

    /// The cloud accepted the write `id` and stored `entity`.
    public mutating func writeConfirmed(_ id: Int64, _ entity: Entity) -> LiveObjectChange? {
        pending.removeAll { $0.id == id }
        // Confirmed while a resumption replays silently: observers see the confirmation now, so the rest of
        // the replay is told to them change by change. Told once at its end, it would skip the versions
        // between the confirmation and the end.
        catchingUp = false
        if let change = remoteChanged(entity) { return change }
        return commit(confirmed)  // an event already brought this version: only the pending mark goes
    }

    /// The cloud refused the write `id`: it is rolled back, and this one emission carries `error` (the
    /// next change of the object clears it).
    public mutating func writeRejected(_ id: Int64, _ error: LiveError) -> LiveObjectChange? {
        pending.removeAll { $0.id == id }
        guard var change = commit(confirmed, force: true) else { return nil }
        change.error = error
        shown = Shown(change)
        return change
    }

    /// The observation starts with what the cache holds; `fetching` says whether a fetch follows.
    public mutating func started(cached: Entity?, fetching: Bool) -> LiveObjectChange? {
        hasStarted = true
        var next = confirmed
        // Realtime events of the object may arrive while its cached copy is read: the cache's copy is shown
        // only when it is newer than what they brought (a copy older than an event heard would go back).
        let heard = knownVersion
        if let cached {
            knownVersion = max(knownVersion, cached.version)
            if !cached.deleted, cached.version > heard {
                next.snapshot = cached
                next.dataStatus = .local
            }
        }
        next.loadingStatus = fetching ? .loading : .notLoading
        return commit(next, force: true)
    }

    /// Continuity was lost (see ``LiveObjectChange/resync``): the notice goes out at once, with
    /// `loadingStatus: loading`, and a fetch follows. No notice when the last load failed: observers were
    /// told then that their data is not known to be current, and the fetch's outcome follows all the same.
    public mutating func resyncStarted() -> LiveObjectChange? {
        eventSinceFetchStarted = false
        // Not started: nothing was shown yet, and the start's fetch follows.
        guard hasStarted, confirmed.loadingStatus != .error else { return nil }
        var next = confirmed
        next.loadingStatus = .loading
        next.resync = true
        return commit(next, force: true)
    }

    /// A fetch starts (first one, or a refresh after the realtime connection came back).
    public mutating func fetchStarted() -> LiveObjectChange? {
        eventSinceFetchStarted = false
        var next = confirmed
        next.loadingStatus = .loading
        return commit(next)
    }

    /// The cloud answered the fetch: `entity` is `nil` when it has no such object.
    public mutating func fetchSucceeded(_ entity: Entity?) -> LiveObjectChange? {
        var next = confirmed
        next.loadingStatus = .loaded
        next.error = nil
        if let entity {
            if entity.version >= knownVersion {
                knownVersion = entity.version
                next.snapshot = entity.deleted ? nil : entity
                next.dataStatus = entity.deleted ? .notExist : .fresh
            } else if next.dataStatus == .local {
                next.dataStatus = next.hasSnapshot ? .fresh : .notExist
            }
        } else if !eventSinceFetchStarted {
            // Not found, and no realtime event arrived since the fetch was sent: the object does not exist.
            next.snapshot = nil
            next.dataStatus = .notExist
        }
        return commit(next)
    }

    /// The realtime subscription is resuming from the cache's checkpoint: the replay takes the fetch's place.
    public mutating func resumeStarted() { catchingUp = true }

    /// The resumption could not prove continuity (or the link is down): a fetch follows after all.
    public mutating func resumeAbandoned() -> LiveObjectChange? {
        catchingUp = false
        return commit(confirmed)
    }

    /// The realtime subscription resumed from the cache's checkpoint and replayed every event since: the
    /// data is as fresh as a fetch would make it (no fetch is needed). Emitted once, in the fetch's place.
    public mutating func caughtUp() -> LiveObjectChange? {
        catchingUp = false
        var next = confirmed
        next.loadingStatus = .loaded
        next.error = nil
        if next.dataStatus == .local || next.dataStatus == .error { next.dataStatus = next.hasSnapshot ? .fresh : .notExist }
        return commit(next)
    }

    /// The fetch failed: the data that was there is kept. It is no longer `fresh` when the cloud refused to
    /// let it be read (`notPermitted`: a permission was revoked): nothing keeps it current any more.
    public mutating func fetchFailed(_ error: LiveError) -> LiveObjectChange? {
        var next = confirmed
        next.loadingStatus = .error
        next.error = error
        if !next.hasSnapshot || error.code == .notPermitted { next.dataStatus = .error }
        return commit(next)
    }

    /// Whether `entity`, carried by a realtime event, skips versions of an object this observation follows
    /// continuously (fresh and loaded, not replaying): versions grow by one with every write (the cloud's API
    /// promises it), so events were missed, whichever topic brought this one (after a reconnection a
    /// collection topic may replay while the object's own topic is yet to be told the cloud cannot). Observers
    /// must then hear a resync notice before it.
    public func skipsVersions(_ entity: Entity) -> Bool {
        guard hasStarted, !catchingUp, knownVersion > 0, confirmed.loadingStatus == .loaded,
            confirmed.dataStatus == .fresh || confirmed.dataStatus == .notExist
        else { return false }
        return entity.version > knownVersion + 1
    }

    /// A realtime event, or the confirmation of a write from this host, carries `entity`.
    public mutating func remoteChanged(_ entity: Entity) -> LiveObjectChange? {
        eventSinceFetchStarted = true
        guard entity.version > knownVersion else { return nil }
        knownVersion = entity.version
        var next = confirmed
        next.snapshot = entity.deleted ? nil : entity
        next.dataStatus = entity.deleted ? .notExist : .fresh
        if next.loadingStatus != .loading { next.loadingStatus = .loaded }
        next.error = nil
        if catchingUp || !hasStarted {
            // Replayed: emitted with the catch-up. Not started yet (heard while the cache was read): emitted
            // by the start, which keeps it over an older cached copy. Observers still see what was emitted.
            if shown == nil { shown = Shown(current) }
            confirmed = next
            return nil
        }
        return commit(next)
    }

    /// Makes `next` the confirmed state and emits it with the pending writes applied, if that differs from
    /// what was last emitted (or `force`).
    private mutating func commit(_ next: LiveObjectChange, force: Bool = false) -> LiveObjectChange? {
        var next = next
        if !force { next.resync = false }  // a notice is one emission; what follows is ordinary state
        let emitted = current
        confirmed = next
        var visible = next
        if !pending.isEmpty, let key = key ?? next.snapshot?.key {
            var snapshot = next.snapshot
            for (_, write) in pending { snapshot = write.applied(to: snapshot, key: key, confirmedVersion: knownVersion) }
            visible.snapshot = snapshot
            visible.dataStatus = snapshot == nil ? .notExist : (next.dataStatus == .fresh ? .fresh : .local)
            visible.pendingWrites = true
        }
        // Not emitted when nothing changed: what observers see stays what it was, which equals `visible`.
        shown = visible.pendingWrites ? Shown(visible) : nil
        guard force || visible != emitted else { return nil }
        return visible
    }

    /// An emitted change kept apart from the confirmed state; immutable, so copies of the state share it.
    private final class Shown: Sendable {
        let change: LiveObjectChange
        init(_ change: LiveObjectChange) { self.change = change }
    }
}

/// How an observation uses the cache.
public enum ObservePolicy: String, Sendable, Codable {
    /// The cached version at once when there is one, then the fresh one. The default.
    case localThenFresh
    /// Nothing until the cloud has answered, or the fetch failed (an `error` loading status, with the
    /// cached data if there is some).
    case freshOnly
}

/// Options of one observation.
public struct ObserveOptions: Sendable, Equatable {
    public var policy: ObservePolicy
    /// Deliver exactly one change (local if cached, else the fetch's outcome), then end.
    public var once: Bool
    /// Only the top-level fields this observer cares about: a new version that changes none of them (with
    /// the same statuses) is not delivered to it. The filter is this observer's own; others of the same
    /// object are not affected. `nil`: every change.
    public var fields: Set<String>?

    public init(policy: ObservePolicy = .localThenFresh, once: Bool = false, fields: Set<String>? = nil) {
        self.policy = policy
        self.once = once
        self.fields = fields
    }
}

/// Decides, per observer, which of the shared observation's changes it receives. Pure.
public struct ObserverFilter: Sendable {
    public let policy: ObservePolicy
    public let once: Bool
    public private(set) var finished = false

    /// The field filter, and what the observer received last to compare with. Boxed, so that observers
    /// without one (nearly all) pay a pointer for it, not the size of a change.
    private indirect enum FieldFilter: Sendable {
        case none
        case watching(Set<String>)
        case delivered(Set<String>, LiveObjectChange)
    }

    private var fieldFilter: FieldFilter

    public init(options: ObserveOptions) {
        policy = options.policy
        once = options.once
        fieldFilter = options.fields.map { .watching($0) } ?? .none
    }

    /// Whether this filter decides by the change alone and remembers nothing (no field filter, not `once`):
    /// then ``admit(_:)`` is ``admits(_:policy:)`` for its policy, and one answer per change serves every such
    /// observer (what a fan-out to many observers computes once).
    public var isStateless: Bool {
        guard !once else { return false }
        if case .none = fieldFilter { return true }
        return false
    }

    /// Whether an observer with `policy`, no field filter and not `once`, receives `change`.
    public static func admits(_ change: LiveObjectChange, policy: ObservePolicy) -> Bool {
        policyAdmits(change, policy: policy, once: false)
    }

    /// Whether `change` goes to this observer. After a `once` observer's delivery, ``finished`` is true.
    public mutating func admit(_ change: LiveObjectChange) -> Bool {
        guard !finished else { return false }
        if case .delivered(let fields, let last) = fieldFilter, Self.sameFields(fields, last, change) { return false }
        guard admitByPolicy(change) else { return false }
        switch fieldFilter {
        case .none: break
        case .watching(let fields), .delivered(let fields, _): fieldFilter = .delivered(fields, change)
        }
        return true
    }

    /// Whether `change` tells an observer of `fields` nothing new over `last`: the same statuses, and the
    /// object still there with the same values of those fields. (A deletion has no snapshot: always news.)
    private static func sameFields(_ fields: Set<String>, _ last: LiveObjectChange, _ change: LiveObjectChange) -> Bool {
        guard !change.resync, change.dataStatus == last.dataStatus, change.loadingStatus == last.loadingStatus,
            let old = last.snapshot, let new = change.snapshot
        else { return false }
        return fields.allSatisfy { old.data[$0] == new.data[$0] }
    }

    private mutating func admitByPolicy(_ change: LiveObjectChange) -> Bool {
        guard Self.policyAdmits(change, policy: policy, once: once) else { return false }
        if once { finished = true }
        return true
    }

    /// The policy's rule, by the change alone.
    private static func policyAdmits(_ change: LiveObjectChange, policy: ObservePolicy, once: Bool) -> Bool {
        // A once-observer's one notification carries data, not a notice that data follows.
        if once && change.resync { return false }
        let awaitingFetch = change.loadingStatus == .loading && change.dataStatus != .fresh
        switch policy {
        case .localThenFresh:
            if once && change.dataStatus == .notExist && change.loadingStatus == .loading { return false }
        case .freshOnly:
            // A failure is the cloud's answer too (or the lack of one): said, with whatever data there is.
            if change.loadingStatus != .error && (change.dataStatus == .local || awaitingFetch) { return false }
        }
        return true
    }
}
