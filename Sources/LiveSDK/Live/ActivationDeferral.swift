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
/// once.
struct ActivationDeferral<Item> {
    /// A burst has paused when none was told a cached copy for this long.
    static var pause: Duration { .milliseconds(10) }
    /// The longest one waits while a burst goes on (checked each ``pause``).
    static var longest: Duration { .milliseconds(250) }
    /// How many wait at most.
    static var limit: Int { 10_000 }

    /// What the engine does next.
    enum Step {
        /// Activate these, in the order they were told.
        case activate([Item])
        /// Call ``pauseElapsed(at:startsReading:)`` after ``pause``, and again after each ``pause`` it answers this.
        case awaitPause
        /// Nothing now (the end of the start reads, or the pause awaited already, will say).
        case wait
    }

    private(set) var waiting: [Item] = []
    private var lastToldAt: ContinuousClock.Instant?
    private var oldestAt: ContinuousClock.Instant?
    /// The engine awaits a pause (it answered ``Step/awaitPause`` and the pause has not ended).
    private(set) var pauseAwaited = false

    /// `items` were told their cached copy at `now`; `startsReading`: more starts are being read.
    mutating func told(_ items: [Item], at now: ContinuousClock.Instant, startsReading: Bool) -> Step {
        guard !items.isEmpty else { return .wait }
        let inBurst = isInBurst(at: now)
        lastToldAt = now
        if waiting.isEmpty { oldestAt = now }
        waiting.append(contentsOf: items)
        if waiting.count >= Self.limit { return .activate(takeAll()) }
        if startsReading { return .wait }
        return settle(inBurst: inBurst)
    }

    /// No more starts are being read, at `now`.
    mutating func startsRead(at now: ContinuousClock.Instant) -> Step {
        settle(inBurst: isInBurst(at: now))
    }

    /// A ``pause`` has passed since the engine was told to await one (or since the last call).
    mutating func pauseElapsed(at now: ContinuousClock.Instant, startsReading: Bool) -> Step {
        let overdue = oldestAt.map { now - $0 >= Self.longest } ?? false
        if !overdue, startsReading || isInBurst(at: now) { return .awaitPause }
        pauseAwaited = false
        return .activate(takeAll())
    }

    private func isInBurst(at now: ContinuousClock.Instant) -> Bool {
        lastToldAt.map { now - $0 < Self.pause } ?? false
    }

    private mutating func settle(inBurst: Bool) -> Step {
        guard !waiting.isEmpty, !pauseAwaited else { return .wait }
        guard inBurst else { return .activate(takeAll()) }
        pauseAwaited = true
        return .awaitPause
    }

    private mutating func takeAll() -> [Item] {
        oldestAt = nil
        defer { waiting = [] }
        return waiting
    }
}
