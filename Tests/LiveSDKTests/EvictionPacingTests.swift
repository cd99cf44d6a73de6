// Licensed under the Apache License, Version 2.0.

import LiveSDK
import SeededRandom
import Testing

@Suite struct EvictionPacingTests {
    private let start = ContinuousClock.now

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func storesAskForAPassAtOnceAndRealtimeEventsEverySixtyFour() {
        var pacing = EvictionPacing(limit: 1_000)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.passEnded(overBound: false, now: at(1)) == .none)
        #expect(pacing.ask(.stored(count: 63, fromRealtime: true), now: at(2)) == .none)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: true), now: at(3)) == .run)
    }

    @Test func oneAtATimeAndOneMoreForWhatAskedMeanwhile() {
        var pacing = EvictionPacing(limit: 10)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(1)) == .none)
        #expect(pacing.ask(.released, now: at(2)) == .none)
        #expect(pacing.passEnded(overBound: false, now: at(3)) == .run)
        #expect(pacing.passEnded(overBound: false, now: at(4)) == .none)
    }

    /// Everything over the bound observed: stores do not start pass after pass, each collecting every observed
    /// key for nothing; one pass runs at the backoff's end for what they stored.
    @Test func afterAPassThatCouldEvictNothingMoreStoresWaitForTheBackoff() {
        var pacing = EvictionPacing(limit: 5)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.passEnded(overBound: true, now: at(10)) == .none)
        let end = at(10) + EvictionPacing.futileBackoff
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(20)) == .wakeAt(end))
        for ms in stride(from: 30, to: 1_000, by: 10) {
            #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(ms)) == .none)
        }
        #expect(pacing.backoffEnded(now: end) == .run)
        #expect(pacing.passEnded(overBound: false, now: end + .milliseconds(1)) == .none)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: end + .milliseconds(2)) == .run)
    }

    /// A release is what makes objects evictable: it asks at once, backoff or not.
    @Test func aReleaseEndsTheBackoff() {
        var pacing = EvictionPacing(limit: 5)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.passEnded(overBound: true, now: at(10)) == .none)
        #expect(pacing.ask(.released, now: at(20)) == .run)
        #expect(pacing.passEnded(overBound: false, now: at(30)) == .none)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(40)) == .run)
    }

    @Test func aReleaseDuringAFutilePassRunsAnotherAtOnce() {
        var pacing = EvictionPacing(limit: 5)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.ask(.released, now: at(5)) == .none)
        #expect(pacing.passEnded(overBound: true, now: at(10)) == .run)
    }

    @Test func storesDuringAFutilePassWaitForTheBackoff() {
        var pacing = EvictionPacing(limit: 5)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(5)) == .none)
        #expect(pacing.passEnded(overBound: true, now: at(10)) == .wakeAt(at(10) + EvictionPacing.futileBackoff))
    }

    /// A wakeup set for one backoff, when a later futile pass set a later one: the stores that asked still get
    /// their pass, at the later end.
    @Test func anEarlyWakeupWaitsForTheLaterBackoff() {
        var pacing = EvictionPacing(limit: 5)
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(0)) == .run)
        #expect(pacing.passEnded(overBound: true, now: at(10)) == .none)
        let first = at(10) + EvictionPacing.futileBackoff
        #expect(pacing.ask(.stored(count: 1, fromRealtime: false), now: at(20)) == .wakeAt(first))
        #expect(pacing.ask(.released, now: at(30)) == .run)
        #expect(pacing.passEnded(overBound: true, now: at(40)) == .none)
        let second = at(40) + EvictionPacing.futileBackoff
        #expect(pacing.backoffEnded(now: first) == .wakeAt(second))
        #expect(pacing.backoffEnded(now: second) == .run)
    }

    /// Seeded schedules of asks, pass ends (over the bound or not) and wakeups, checked for what the pacing
    /// promises whatever the order: never two passes at once, and no ask lost: after every ask a pass starts,
    /// once the engine runs what it is told and its passes end.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func noAskIsLostAndPassesNeverOverlap(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var pacing = EvictionPacing(limit: 5)
        var now = start
        var running: ContinuousClock.Instant?
        var wakeups: [ContinuousClock.Instant] = []
        var passStarts: [ContinuousClock.Instant] = []
        var asks: [(at: ContinuousClock.Instant, released: Bool)] = []
        func perform(_ action: EvictionPacing.Action) {
            switch action {
            case .none: break
            case .run:
                #expect(running == nil, "two passes at once (seed \(seed))")
                running = now
                passStarts.append(now)
            case .wakeAt(let instant): wakeups.append(instant)
            }
        }
        func fireWakeupsDue() {
            wakeups.sort()
            while let first = wakeups.first, first <= now {
                wakeups.removeFirst()
                perform(pacing.backoffEnded(now: first))
            }
        }
        for _ in 0..<400 {
            now = now + .milliseconds(Int(random.next() % 120))
            fireWakeupsDue()
            switch random.next() % 4 {
            case 0:
                asks.append((now, true))
                perform(pacing.ask(.released, now: now))
            case 1, 2:
                asks.append((now, false))
                perform(pacing.ask(.stored(count: 1, fromRealtime: false), now: now))
            default:
                if running != nil {
                    running = nil
                    perform(pacing.passEnded(overBound: random.next() % 2 == 0, now: now))
                }
            }
        }
        // Let everything settle: passes end (under the bound), wakeups fire.
        for _ in 0..<10 {
            now = now + EvictionPacing.futileBackoff
            fireWakeupsDue()
            if running != nil {
                running = nil
                perform(pacing.passEnded(overBound: false, now: now))
            }
        }
        for ask in asks {
            let served = passStarts.first { $0 >= ask.at }
            #expect(served != nil, "an ask at \(ask.at - start) got no pass (seed \(seed))")
        }
    }
}
