// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import Synchronization

/// One object's observation inside the engine, shared by all its observers: one cache read, one fetch and
/// one realtime topic, whatever the number of observers.
///
/// State changes happen on the engine's actor; observers may be removed from any thread (token release).
package final class SharedObjectObservation: Sendable, Hashable {
    typealias Handler = @Sendable (LiveObjectChange) -> Void

    private struct Observer {
        var filter: ObserverFilter
        let handler: Handler
    }

    private struct Inner {
        var state: LiveObjectState
        var observers = IDTable<Observer>()
        var nextID = 0
        /// The checkpoint its start read (``LiveClient/observe(_:)``), until its activation takes it: `nil` when
        /// none was read, `.some(nil)` when the cache held none.
        var startCheckpoint: Int64??
    }

    let key: EntityKey
    private let inner: Mutex<Inner>

    init(key: EntityKey) {
        self.key = key
        inner = Mutex(Inner(state: LiveObjectState(key: key)))
    }

    /// Adds an observer. When the observation has already started, it receives the current state at once
    /// (if its filter admits it). Returns the observer's id.
    func add(options: ObserveOptions, handler: @escaping Handler) -> Int {
        let (id, initial) = inner.withLock { inner -> (Int, LiveObjectChange?) in
            inner.nextID += 1
            var observer = Observer(filter: ObserverFilter(options: options), handler: handler)
            var initial: LiveObjectChange?
            if inner.state.hasStarted, observer.filter.admit(inner.state.current) { initial = inner.state.current }
            if !observer.filter.finished { inner.observers.insert(observer, id: inner.nextID) }
            return (inner.nextID, initial)
        }
        if let initial { handler(initial) }
        return id
    }

    /// Removes an observer; returns whether none is left.
    @discardableResult
    func remove(_ id: Int) -> Bool {
        inner.withLock { inner in
            inner.observers.remove(id)
            return inner.observers.isEmpty
        }
    }

    /// Keeps the checkpoint of the object's topic that its start read, for its activation (which resumes from it).
    func keepStartCheckpoint(_ checkpoint: Int64?) { inner.withLock { $0.startCheckpoint = .some(checkpoint) } }

    /// The checkpoint its start read, once (`nil` when none was read, or it was taken already).
    func takeStartCheckpoint() -> Int64?? {
        inner.withLock { inner in
            defer { inner.startCheckpoint = nil }
            return inner.startCheckpoint
        }
    }

    var isUnobserved: Bool { inner.withLock { $0.observers.isEmpty } }
    /// Whether the observation was told what it starts from (``LiveObjectState/started(cached:fetching:)``).
    var hasStarted: Bool { inner.withLock { $0.state.hasStarted } }
    var current: LiveObjectChange { inner.withLock { $0.state.current } }

    /// Whether a realtime event's `entity` skips versions (see ``LiveObjectState/skipsVersions(_:)``).
    func skipsVersions(_ entity: Entity) -> Bool { inner.withLock { $0.state.skipsVersions(entity) } }

    /// Applies an event to the state machine and delivers the resulting change, if any, to the observers
    /// whose filters admit it. Observers that have fired their once are dropped.
    func apply(_ event: (inout LiveObjectState) -> LiveObjectChange?) {
        let deliveries = inner.withLock { inner -> [(Handler, LiveObjectChange)] in
            guard let change = event(&inner.state) else { return [] }
            var out: [(Handler, LiveObjectChange)] = []
            var finished: [Int] = []
            inner.observers.updateEach { id, observer in
                if observer.filter.admit(change) { out.append((observer.handler, change)) }
                if observer.filter.finished { finished.append(id) }
            }
            for id in finished { inner.observers.remove(id) }
            return out
        }
        for (handler, change) in deliveries { handler(change) }
    }

    /// By identity: the engine holds one observation per key at a time, and an ended one is another.
    package static func == (lhs: SharedObjectObservation, rhs: SharedObjectObservation) -> Bool { lhs === rhs }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
