// Licensed under the Apache License, Version 2.0.

/// When the engine runs a pass of the cache's eviction (``LiveClient/evictOverBound()``). Pure: the engine asks
/// it, does what it answers, and says when a pass ended.
///
/// - Stores ask for a pass: every store from a fetch or a write, and realtime events every 64 stores (or every
///   `limit`, if smaller).
/// - One pass at a time: what asks while one runs gets one more pass once it ends.
/// - A pass that leaves the cache over its bound found that everything left over it is observed: it could
///   evict nothing more. Another pass finds the same until an observation or a window ends, or until objects
///   nobody observes are stored. Each such pass collects every observed key on the engine's loop, so passes
///   asked for by stores then wait ``futileBackoff``; one runs when it ends if a store asked meanwhile. A release asks at once: it is what makes objects evictable.
///
/// So the cache holds at most its bound, except for observed objects (never evicted) and, while everything
/// over the bound is observed, objects stored in the last ``futileBackoff``.
package struct EvictionPacing: Sendable {
    /// What asks for a pass.
    package enum Ask: Sendable, Equatable {
        /// `count` objects stored (from realtime events, or else from fetches and writes).
        case stored(count: Int, fromRealtime: Bool)
        /// An observation of an object or a window ended: what it kept may go.
        case released
    }

    /// What the engine does.
    package enum Action: Sendable, Equatable {
        case none
        /// Queue a pass now.
        case run
        /// Call ``backoffEnded()`` at this instant (then do what it answers).
        case wakeAt(ContinuousClock.Instant)
    }

    /// How long stores' asks wait after a pass that could evict nothing more.
    package static let futileBackoff: Duration = .seconds(1)

    let limit: Int
    private(set) var storesSincePass = 0
    /// A pass is queued or running.
    private(set) var passUnderWay = false
    private var storedMeanwhile = false
    private var releasedMeanwhile = false
    /// Set by a pass that left the cache over its bound: stores' asks wait until then.
    private(set) var backoffUntil: ContinuousClock.Instant?
    /// A store asked during the backoff, and a wakeup at its end is set.
    private var wakeupSet = false

    package init(limit: Int) {
        self.limit = limit
    }

    package mutating func ask(_ ask: Ask, now: ContinuousClock.Instant) -> Action {
        switch ask {
        case .stored(let count, let fromRealtime):
            storesSincePass += count
            if fromRealtime && storesSincePass < min(64, limit) { return .none }
            if let until = backoffUntil, now < until {
                guard !wakeupSet else { return .none }
                wakeupSet = true
                return .wakeAt(until)
            }
            backoffUntil = nil
            return requestPass(released: false)
        case .released:
            backoffUntil = nil
            return requestPass(released: true)
        }
    }

    /// The wakeup a ``Action/wakeAt(_:)`` asked for.
    package mutating func backoffEnded(now: ContinuousClock.Instant) -> Action {
        if let until = backoffUntil, now < until {
            // A pass since set a later backoff: wait for its end instead.
            return .wakeAt(until)
        }
        wakeupSet = false
        backoffUntil = nil
        return requestPass(released: false)
    }

    /// A pass ended; `overBound`: the cache still holds more than `limit` (all of it observed).
    package mutating func passEnded(overBound: Bool, now: ContinuousClock.Instant) -> Action {
        passUnderWay = false
        let (stored, released) = (storedMeanwhile, releasedMeanwhile)
        (storedMeanwhile, releasedMeanwhile) = (false, false)
        guard overBound else {
            backoffUntil = nil
            return stored || released ? requestPass(released: released) : .none
        }
        if released {
            backoffUntil = nil
            return requestPass(released: true)
        }
        let until = now + Self.futileBackoff
        backoffUntil = until
        guard stored, !wakeupSet else { return .none }
        wakeupSet = true
        return .wakeAt(until)
    }

    private mutating func requestPass(released: Bool) -> Action {
        guard !passUnderWay else {
            if released { releasedMeanwhile = true } else { storedMeanwhile = true }
            return .none
        }
        passUnderWay = true
        storesSincePass = 0
        return .run
    }
}
