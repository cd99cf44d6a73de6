// Licensed under the Apache License, Version 2.0.

import LiveSDK
import SeededRandom
import Testing

@Suite struct ActivationDeferralTests {
    typealias Deferral = ActivationDeferral<Int>
    private let start = ContinuousClock.now

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    private func activated(_ step: Deferral.Step) -> [Int]? {
        if case .activate(let items) = step { return items }
        return nil
    }

    private func awaitsPause(_ step: Deferral.Step) -> Bool {
        if case .awaitPause = step { return true }
        return false
    }

    private func waits(_ step: Deferral.Step) -> Bool {
        if case .wait = step { return true }
        return false
    }

    @Test func anObservationOnItsOwnIsActivatedAtOnce() {
        var deferral = Deferral()
        #expect(activated(deferral.told([1], at: at(0), startsReading: false)) == [1])
        #expect(activated(deferral.told([2], at: at(20), startsReading: false)) == [2])
        // The end of a read that brought none waits for nothing.
        #expect(waits(deferral.startsRead(at: at(21))))
        #expect(deferral.waiting.isEmpty)
    }

    @Test func aBurstIsActivatedOnceItPauses() {
        var deferral = Deferral()
        #expect(activated(deferral.told([1], at: at(0), startsReading: false)) == [1])
        #expect(awaitsPause(deferral.told([2, 3], at: at(3), startsReading: false)))
        #expect(waits(deferral.told([4], at: at(6), startsReading: false)))
        #expect(waits(deferral.told([5], at: at(9), startsReading: true)))
        // 10 ms after the first wait began, the last was told 4 ms ago: the burst goes on.
        #expect(awaitsPause(deferral.pauseElapsed(at: at(13), startsReading: false)))
        // Starts still read: not yet, however long since the last was told.
        #expect(awaitsPause(deferral.pauseElapsed(at: at(23), startsReading: true)))
        #expect(activated(deferral.pauseElapsed(at: at(33), startsReading: false)) == [2, 3, 4, 5])
        #expect(!deferral.pauseAwaited)
    }

    @Test func startsReadWithinTheBurstAwaitItsPause() {
        var deferral = Deferral()
        #expect(waits(deferral.told([1], at: at(0), startsReading: true)))
        #expect(awaitsPause(deferral.startsRead(at: at(2))))
        #expect(activated(deferral.pauseElapsed(at: at(12), startsReading: false)) == [1])
    }

    @Test func noneWaitsMuchLongerThanTheLongestDeferral() {
        var deferral = Deferral()
        var activatedAt: [Int: Int] = [:]
        var timerAt: Int?
        // One told every 5 ms for 600 ms: the burst never pauses.
        for (index, time) in stride(from: 0, through: 600, by: 5).enumerated() {
            while let due = timerAt, due <= time {
                let step = deferral.pauseElapsed(at: at(due), startsReading: false)
                timerAt = awaitsPause(step) ? due + 10 : nil
                for item in activated(step) ?? [] { activatedAt[item] = due }
            }
            let step = deferral.told([index], at: at(time), startsReading: false)
            if awaitsPause(step) { timerAt = time + 10 }
            for item in activated(step) ?? [] { activatedAt[item] = time }
        }
        for (item, time) in activatedAt { #expect(time - item * 5 <= 250 + 10, "item \(item) told at \(item * 5) ms, activated at \(time) ms") }
        #expect(activatedAt.count > 100)
    }

    @Test func aFullQueueIsActivatedAtOnce() {
        var deferral = Deferral()
        _ = deferral.told([0], at: at(0), startsReading: false)
        #expect(awaitsPause(deferral.told(Array(1..<Deferral.limit), at: at(1), startsReading: false)))
        #expect(activated(deferral.told([Deferral.limit], at: at(2), startsReading: true))?.count == Deferral.limit)
        // The pause awaited then finds nothing to wait for.
        #expect(activated(deferral.pauseElapsed(at: at(12), startsReading: false))?.count == 0)
    }

    @Test func oneTakenOutIsLeftToTheEngine() {
        var deferral = Deferral()
        #expect(activated(deferral.told([1], at: at(0), startsReading: false)) == [1])
        #expect(awaitsPause(deferral.told([2, 3, 4], at: at(3), startsReading: false)))
        let takes = [deferral.take(3), deferral.take(3), deferral.take(9), deferral.take(1)]
        // Taken once; 9 was never told; 1 was activated already.
        #expect(takes == [true, false, false, false])
        #expect(deferral.waiting == [2, 4])
        #expect(activated(deferral.pauseElapsed(at: at(13), startsReading: false)) == [2, 4])
    }

    @Test func takingTheLastLeavesThePauseNothingToActivate() {
        var deferral = Deferral()
        _ = deferral.told([1], at: at(0), startsReading: false)
        #expect(awaitsPause(deferral.told([2], at: at(3), startsReading: false)))
        let taken = deferral.take(2)
        #expect(taken && deferral.waiting.isEmpty)
        #expect(activated(deferral.pauseElapsed(at: at(13), startsReading: false)) == [])
        // The next one on its own is activated at once again.
        #expect(activated(deferral.told([5], at: at(40), startsReading: false)) == [5])
    }

    @Test func oneToldTwiceWaitsOnce() {
        var deferral = Deferral()
        _ = deferral.told([1], at: at(0), startsReading: false)
        #expect(awaitsPause(deferral.told([2, 2], at: at(3), startsReading: false)))
        #expect(waits(deferral.told([2], at: at(4), startsReading: false)))
        #expect(activated(deferral.pauseElapsed(at: at(20), startsReading: false)) == [2])
    }

    @Test func thePauseAndTheLongestWaitAreTheConfigurations() {
        var deferral = ActivationDeferral<Int>(pause: .milliseconds(50), longest: .seconds(1))
        _ = deferral.told([1], at: at(0), startsReading: false)
        #expect(awaitsPause(deferral.told([2], at: at(30), startsReading: false)))
        // 40 ms after the last: within a pause of 50.
        #expect(awaitsPause(deferral.pauseElapsed(at: at(70), startsReading: false)))
        #expect(activated(deferral.pauseElapsed(at: at(80), startsReading: false)) == [2])
    }

    /// Random schedules of batches told, reads, the pause's timer and observations taken out (an observer that
    /// waits for fresh data joins), against what the policy promises: each observation is activated exactly
    /// once, in the order they were told, by the deferral or (taken out) by the engine; none waits longer than
    /// the longest deferral (plus a pause, and the read it waited for); and one on its own, with no read going on
    /// and none told within a pause before it, is activated the moment it is told.
    @Test(arguments: 0..<200)
    func randomSchedulesKeepThePromises(seed: UInt64) {
        var random = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        var deferral = Deferral()
        var now = 0  // in tenths of a millisecond
        func instant(_ tenths: Int) -> ContinuousClock.Instant { start + .microseconds(tenths * 100) }
        var readEndsAt: Int?
        var timerAt: Int?
        var toldAt: [Int] = []
        var order: [Int] = []
        var activatedAt: [Int: Int] = [:]
        var taken: Set<Int> = []
        var lastToldAt: Int?
        var failures: [String] = []

        func apply(_ step: Deferral.Step, at time: Int) {
            switch step {
            case .activate(let items):
                for item in items {
                    if activatedAt[item] != nil { failures.append("item \(item) activated twice") }
                    activatedAt[item] = time
                    order.append(item)
                }
            case .awaitPause:
                if timerAt != nil { failures.append("a second pause awaited at \(time)") }
                timerAt = time + 100
            case .wait:
                break
            }
        }

        /// Runs what falls due up to `limit` (all of it when `nil`): the end of a read, the pause's timer, in
        /// time order.
        func runDue(upTo limit: Int?) {
            while let due = [readEndsAt, timerAt].compactMap({ $0 }).filter({ $0 <= (limit ?? .max) }).min() {
                if due == readEndsAt {
                    readEndsAt = nil
                    apply(deferral.startsRead(at: instant(due)), at: due)
                } else {
                    timerAt = nil
                    apply(deferral.pauseElapsed(at: instant(due), startsReading: readEndsAt != nil), at: due)
                }
            }
        }

        // How often a burst pauses: from bursts of a few batches to bursts longer than the longest deferral.
        let pauseOdds = [2, 10, 30][Int.random(in: 0..<3, using: &random)]
        for _ in 0..<Int.random(in: 1...200, using: &random) {
            let pauses = Int.random(in: 0..<100, using: &random) < pauseOdds
            now += pauses ? Int.random(in: 100...500, using: &random) : Int.random(in: 0...90, using: &random)
            runDue(upTo: now)
            if readEndsAt == nil, Int.random(in: 0..<4, using: &random) == 0 {
                readEndsAt = now + Int.random(in: 1...200, using: &random)
            }
            let count =
                Int.random(in: 0..<5, using: &random) == 0 ? Int.random(in: 100...3_000, using: &random) : Int.random(in: 1...3, using: &random)
            let items = Array(toldAt.count..<(toldAt.count + count))
            toldAt.append(contentsOf: repeatElement(now, count: count))
            let alone =
                readEndsAt == nil && deferral.waitingCount == 0 && !deferral.pauseAwaited
                && (lastToldAt.map { now - $0 >= 100 } ?? true)
            lastToldAt = now
            apply(deferral.told(items, at: instant(now), startsReading: readEndsAt != nil), at: now)
            if deferral.waitingCount >= Deferral.limit { failures.append("\(deferral.waitingCount) waiting at \(now)") }
            if alone, items.contains(where: { activatedAt[$0] != now }) {
                failures.append("a batch on its own at \(now) was not activated at once")
            }
            // Now and then an observer that waits for fresh data joins one: the engine activates it.
            if Int.random(in: 0..<8, using: &random) == 0, let item = (0..<toldAt.count).randomElement(using: &random) {
                let waited = deferral.holds(item)
                if deferral.take(item) != waited { failures.append("take(\(item)) answered \(!waited) at \(now)") }
                if waited {
                    activatedAt[item] = now
                    taken.insert(item)
                }
            }
        }
        // The schedule ends: the read finishes, the timer runs out.
        runDue(upTo: nil)
        if order != (0..<toldAt.count).filter({ !taken.contains($0) }) {
            failures.append("\(order.count) of \(toldAt.count - taken.count) activated, or out of the order told")
        }
        for (item, told) in toldAt.enumerated() {
            guard let activated = activatedAt[item], activated - told > 2_500 + 100 + 200 else { continue }
            failures.append("item \(item) told at \(told), activated at \(activated)")
        }
        #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(3))")
    }
}
