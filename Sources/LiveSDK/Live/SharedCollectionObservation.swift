// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveJSON
import Synchronization

/// One collection window's observation inside the engine, shared by all observers of an equal window: one
/// fetch, one realtime topic, one change set per update (with one `emission` number, so a consumer can encode
/// it once for every observer).
///
/// State changes happen on the engine's actor; observers may be removed from any thread (token release).
final class SharedCollectionObservation: Sendable {
    typealias Handler = @Sendable (LiveCollectionChange) -> Void

    struct Observer: Sendable {
        let once: Bool
        /// Only changes of these top-level fields count as modifications for this observer (see ``filtered``).
        var fields: Set<String>? = nil
        let handler: Handler
    }

    private struct Inner {
        var state: LiveCollectionState
        var observers: [Int: Observer] = [:]
    }

    /// Emission numbers, unique across the process.
    private static let emissions = Atomic<Int>(0)
    static func nextEmission() -> Int { emissions.add(1, ordering: .relaxed).newValue }

    let window: CollectionWindow
    private let inner: Mutex<Inner>

    init(window: CollectionWindow) {
        self.window = window
        inner = Mutex(Inner(state: LiveCollectionState(window: window)))
    }

    /// A window that starts where another left off (paging): no emission until something changes.
    init(window: CollectionWindow, seed: LiveCollectionChange) {
        self.window = window
        inner = Mutex(Inner(state: LiveCollectionState(window: window, seed: seed)))
    }

    /// Whether a once-observer's single delivery can be `change`: data, not a notice that data follows.
    private static func isFinal(_ change: LiveCollectionChange) -> Bool {
        !change.resync && (change.dataStatus == .local || change.loadingStatus == .loaded || change.loadingStatus == .error)
    }

    /// Adds an observer that has seen `previous` (nil: nothing yet). When the observation has started, the
    /// observer at once receives the current state relative to what it saw, unless that is what it saw.
    func add(_ id: Int, _ observer: Observer, previous: [Entity]?) {
        let initial = inner.withLock { inner -> LiveCollectionChange? in
            var initial: LiveCollectionChange?
            if inner.state.hasStarted {
                var change = inner.state.current.relative(to: previous ?? [])
                change.emission = Self.nextEmission()
                change.resync = false
                if previous == nil || !change.changes.isEmpty { initial = change }
            }
            if let initial, observer.once, Self.isFinal(initial) { return initial }
            inner.observers[id] = observer
            return initial
        }
        if let initial { observer.handler(initial) }
    }

    /// Removes an observer; returns it (nil when it was not there).
    @discardableResult
    func remove(_ id: Int) -> Observer? {
        inner.withLock { $0.observers.removeValue(forKey: id) }
    }

    var isUnobserved: Bool { inner.withLock { $0.observers.isEmpty } }
    var current: LiveCollectionChange { inner.withLock { $0.state.current } }
    var confirmed: LiveCollectionChange { inner.withLock { $0.state.confirmedWindow } }
    var hasStarted: Bool { inner.withLock { $0.state.hasStarted } }
    var needsRefill: Bool { inner.withLock { $0.state.needsRefill } }

    /// Applies an event to the state machine and delivers the resulting change, if any, to every observer
    /// (once-observers only their one final change, after which they are dropped).
    func apply(_ event: (inout LiveCollectionState) -> LiveCollectionChange?) {
        let deliveries = inner.withLock { inner -> [(Handler, LiveCollectionChange)] in
            let before = inner.state.current
            guard var change = event(&inner.state) else { return [] }
            change.emission = Self.nextEmission()
            var out: [(Handler, LiveCollectionChange)] = []
            for (id, observer) in inner.observers {
                if observer.once {
                    // Its one delivery is the whole state: it saw none of the earlier emissions.
                    guard Self.isFinal(change) else { continue }
                    inner.observers[id] = nil
                    var whole = change.relative(to: [])
                    whole.emission = Self.nextEmission()
                    out.append((observer.handler, whole))
                } else if let fields = observer.fields {
                    if let filtered = Self.filtered(change, before: before, fields: fields) { out.append((observer.handler, filtered)) }
                } else {
                    out.append((observer.handler, change))
                }
            }
            return out
        }
        for (handler, change) in deliveries { handler(change) }
    }

    /// `change` as an observer of `fields` receives it: only the modifications that change one of those
    /// fields; `nil` (nothing delivered) when that leaves nothing — no insertion, deletion, move, status or
    /// pending-write change. The window's items are all there either way, and indices stay valid, since a
    /// skipped change moves nothing.
    static func filtered(_ change: LiveCollectionChange, before: LiveCollectionChange, fields: Set<String>) -> LiveCollectionChange? {
        let kept = change.changes.modifications.filter { pair in
            guard before.items.indices.contains(pair.old), change.items.indices.contains(pair.new) else { return true }
            let (old, new) = (before.items[pair.old].data, change.items[pair.new].data)
            return fields.contains { old[$0] != new[$0] }
        }
        if kept.count == change.changes.modifications.count { return change }
        var filtered = change
        filtered.changes.modifications = kept
        filtered.emission = nextEmission()  // not the shared change any more
        let nothingElse =
            kept.isEmpty && change.changes.insertions.isEmpty && change.changes.deletions.isEmpty && change.changes.moves.isEmpty
            && !change.resync && change.pendingIDs == before.pendingIDs && change.hasSameStatuses(as: before)
        return nothingElse ? nil : filtered
    }
}
