// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

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
public struct LiveObjectChange: Sendable, Equatable {
    /// The object, or `nil` when it does not exist (or could not be loaded and nothing is cached).
    public var snapshot: Entity?
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: LiveError?
    /// A resync notice: the engine cannot prove it saw every change since the previous emission (the
    /// realtime link was down and the cloud could not replay what was missed). The full state follows in
    /// the next emission. Set on this one change only.
    public var resync: Bool

    public init(snapshot: Entity?, dataStatus: DataStatus, loadingStatus: LoadingStatus, error: LiveError? = nil, resync: Bool = false) {
        self.snapshot = snapshot
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.error = error
        self.resync = resync
    }
}

/// The status machine of one observed object. Pure: events in, the change to emit (if any) out.
///
/// The order of emissions is fixed:
/// 1. `started`: the cached version with `local`/`loading`, or `notExist`/`loading` when nothing is cached.
///    (After a loss of continuity, a `resync` notice with `loading` takes this place, and 2. follows.)
/// 2. The fetch's outcome: `fresh`/`loaded` (or `notExist`/`loaded`), or the kept data with `loadingStatus: error`.
/// 3. Each realtime change with a higher version: `fresh`/`loaded` with the new snapshot.
///
/// A snapshot with a lower version than one already emitted is never emitted, and nothing is emitted when
/// neither data nor statuses changed.
public struct LiveObjectState: Sendable {
    public private(set) var current: LiveObjectChange
    /// The highest version seen (a deleted object keeps its last version, so stale answers stay ignored).
    private var knownVersion: Int64 = 0
    private var eventSinceFetchStarted = false
    public private(set) var hasStarted = false

    public init() {
        current = LiveObjectChange(snapshot: nil, dataStatus: .notExist, loadingStatus: .notLoading)
    }

    /// The observation starts with what the cache holds; `fetching` says whether a fetch follows.
    public mutating func started(cached: Entity?, fetching: Bool) -> LiveObjectChange? {
        hasStarted = true
        var next = current
        if let cached, !cached.deleted {
            next.snapshot = cached
            next.dataStatus = .local
            knownVersion = cached.version
        }
        next.loadingStatus = fetching ? .loading : .notLoading
        return commit(next, force: true)
    }

    /// Continuity was lost (see ``LiveObjectChange/resync``): the notice goes out at once, with
    /// `loadingStatus: loading`, and a fetch follows.
    public mutating func resyncStarted() -> LiveObjectChange? {
        eventSinceFetchStarted = false
        var next = current
        next.loadingStatus = .loading
        next.resync = true
        return commit(next, force: true)
    }

    /// A fetch starts (first one, or a refresh after the realtime connection came back).
    public mutating func fetchStarted() -> LiveObjectChange? {
        eventSinceFetchStarted = false
        var next = current
        next.loadingStatus = .loading
        return commit(next)
    }

    /// The cloud answered the fetch: `entity` is `nil` when it has no such object.
    public mutating func fetchSucceeded(_ entity: Entity?) -> LiveObjectChange? {
        var next = current
        next.loadingStatus = .loaded
        next.error = nil
        if let entity {
            if entity.version >= knownVersion {
                knownVersion = entity.version
                next.snapshot = entity.deleted ? nil : entity
                next.dataStatus = entity.deleted ? .notExist : .fresh
            } else if next.dataStatus == .local {
                next.dataStatus = next.snapshot == nil ? .notExist : .fresh
            }
        } else if !eventSinceFetchStarted {
            // Not found, and no realtime event arrived since the fetch was sent: the object does not exist.
            next.snapshot = nil
            next.dataStatus = .notExist
        }
        return commit(next)
    }

    /// The fetch failed: the data that was there is kept.
    public mutating func fetchFailed(_ error: LiveError) -> LiveObjectChange? {
        var next = current
        next.loadingStatus = .error
        next.error = error
        if next.snapshot == nil { next.dataStatus = .error }
        return commit(next)
    }

    /// A realtime event, or the confirmation of a write from this host, carries `entity`.
    public mutating func remoteChanged(_ entity: Entity) -> LiveObjectChange? {
        eventSinceFetchStarted = true
        guard entity.version > knownVersion else { return nil }
        knownVersion = entity.version
        var next = current
        next.snapshot = entity.deleted ? nil : entity
        next.dataStatus = entity.deleted ? .notExist : .fresh
        if next.loadingStatus != .loading { next.loadingStatus = .loaded }
        next.error = nil
        return commit(next)
    }

    private mutating func commit(_ next: LiveObjectChange, force: Bool = false) -> LiveObjectChange? {
        var next = next
        if !force { next.resync = false }  // a notice is one emission; what follows is ordinary state
        guard force || next != current else { return nil }
        current = next
        return next
    }
}

/// How an observation uses the cache.
public enum ObservePolicy: String, Sendable, Codable {
    /// The cached version at once when there is one, then the fresh one. The default.
    case localThenFresh
    /// Nothing until the cloud has answered.
    case freshOnly
}

/// Options of one observation.
public struct ObserveOptions: Sendable, Equatable {
    public var policy: ObservePolicy
    /// Deliver exactly one change (local if cached, else the fetch's outcome), then end.
    public var once: Bool

    public init(policy: ObservePolicy = .localThenFresh, once: Bool = false) {
        self.policy = policy
        self.once = once
    }
}

/// Decides, per observer, which of the shared observation's changes it receives. Pure.
public struct ObserverFilter: Sendable {
    public let options: ObserveOptions
    public private(set) var finished = false

    public init(options: ObserveOptions) { self.options = options }

    /// Whether `change` goes to this observer. After a `once` observer's delivery, ``finished`` is true.
    public mutating func admit(_ change: LiveObjectChange) -> Bool {
        guard !finished else { return false }
        // A once-observer's one notification carries data, not a notice that data follows.
        if options.once && change.resync { return false }
        let awaitingFetch = change.loadingStatus == .loading && change.dataStatus != .fresh
        switch options.policy {
        case .localThenFresh:
            if options.once && change.dataStatus == .notExist && change.loadingStatus == .loading { return false }
        case .freshOnly:
            if change.dataStatus == .local || awaitingFetch { return false }
        }
        if options.once { finished = true }
        return true
    }
}
