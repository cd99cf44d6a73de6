// Licensed under the Apache License, Version 2.0.

/// When new observations that were told a cached copy are activated (each resumes its topic or reads the
/// cloud: ``LiveClient/activate(_:)``). Pure: the engine gives it the time and whether starts are being read,
/// and does what it answers.
///
/// A burst of new observations (a list of thousands opened at once) is told what the cache holds first, batch
/// after batch, and activated once it pauses: no more starts are being read and none was told a cached copy
/// for ``pause``. Activated as they came, their subscriptions, replays and fresh states took the engine's loop
/// from the cached answers of the batches behind them. An observation on its own (none other told a cached
/// copy within ``pause`` before it) is activated as soon as no start is being read, so it waits for nothing.
/// However long a burst lasts, none waits longer than about ``longest``, and ``limit`` waiting are activated at
/// once. One whose observer waits for fresh data is taken out (``take(_:)``) and activated by the engine at once.
package struct ActivationDeferral<Item: Hashable & Sendable>: Sendable {
    /// A burst has paused when none was told a cached copy for this long
    /// (``LiveSDKConfiguration/activationPause``).
    let pause: Duration
    /// The longest one waits while a burst goes on, checked each ``pause``
    /// (``LiveSDKConfiguration/activationLongestWait``).
    let longest: Duration
    /// How many wait at most.
    package static var limit: Int { 10_000 }

    package init(pause: Duration = .milliseconds(10), longest: Duration = .milliseconds(250)) {
        self.pause = pause
        self.longest = longest
    }

    /// What the engine does next.
    package enum Step {
        /// Activate these, in the order they were told.
        case activate([Item])
        /// Call ``pauseElapsed(at:startsReading:)`` after ``pause``, and again after each ``pause`` it answers this.
        case awaitPause
        /// Nothing now (the end of the start reads, or the pause awaited already, will say).
        case wait
    }

    /// The items told, in order, with those taken out since (``take(_:)``) still in place: ``held`` says which
    /// wait.
    private var told: [Item] = []
    private var held: Set<Item> = []
    private var lastToldAt: ContinuousClock.Instant?
    private var oldestAt: ContinuousClock.Instant?
    /// The engine awaits a pause (it answered ``Step/awaitPause`` and the pause has not ended).
    package private(set) var pauseAwaited = false

    /// The items waiting, in the order they were told.
    package var waiting: [Item] { told.filter { held.contains($0) } }
    /// How many wait.
    package var waitingCount: Int { held.count }
    /// Whether `item` waits.
    package func holds(_ item: Item) -> Bool { held.contains(item) }

    /// `items` were told their cached copy at `now`; `startsReading`: more starts are being read.
    package mutating func told(_ items: [Item], at now: ContinuousClock.Instant, startsReading: Bool) -> Step {
        guard !items.isEmpty else { return .wait }
        let inBurst = isInBurst(at: now)
        lastToldAt = now
        if held.isEmpty { oldestAt = now }
        for item in items where held.insert(item).inserted { told.append(item) }
        if held.count >= Self.limit { return .activate(takeAll()) }
        if startsReading { return .wait }
        return settle(inBurst: inBurst)
    }

    /// No more starts are being read, at `now`.
    package mutating func startsRead(at now: ContinuousClock.Instant) -> Step {
        settle(inBurst: isInBurst(at: now))
    }

    /// A ``pause`` has passed since the engine was told to await one (or since the last call).
    package mutating func pauseElapsed(at now: ContinuousClock.Instant, startsReading: Bool) -> Step {
        let overdue = oldestAt.map { now - $0 >= longest } ?? false
        if !overdue, startsReading || isInBurst(at: now) { return .awaitPause }
        pauseAwaited = false
        return .activate(takeAll())
    }

    private func isInBurst(at now: ContinuousClock.Instant) -> Bool {
        lastToldAt.map { now - $0 < pause } ?? false
    }

    /// Takes `item` out of the deferral (the engine activates it now); returns whether it was waiting. The pause
    /// awaited, if any, goes on for the others.
    package mutating func take(_ item: Item) -> Bool {
        guard held.remove(item) != nil else { return false }
        if held.isEmpty {
            told = []
            oldestAt = nil
        }
        return true
    }

    private mutating func settle(inBurst: Bool) -> Step {
        guard !held.isEmpty, !pauseAwaited else { return .wait }
        guard inBurst else { return .activate(takeAll()) }
        pauseAwaited = true
        return .awaitPause
    }

    private mutating func takeAll() -> [Item] {
        oldestAt = nil
        defer {
            told = []
            held = []
        }
        return waiting
    }
}
