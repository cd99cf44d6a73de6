// Licensed under the Apache License, Version 2.0.

import LiveSDK
import SeededRandom
import Testing

@Suite struct TopicLingersTests {
    private let start = ContinuousClock.now
    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func aLingerEndsItsDurationAfterTheRelease() {
        var lingers = TopicLingers<Int>(duration: .milliseconds(100))
        #expect(lingers.nextDeadline == nil)
        lingers.linger(1, at: at(0))
        lingers.linger(2, at: at(30))
        #expect(lingers.nextDeadline == at(100))
        #expect(lingers.expired(at: at(99)).isEmpty)
        #expect(lingers.expired(at: at(100)) == [1])
        #expect(lingers.nextDeadline == at(130))
        #expect(lingers.expired(at: at(500)) == [2])
        #expect(lingers.nextDeadline == nil)
        #expect(lingers.count == 0)
    }

    @Test func aTopicReleasedAgainLingersFromItsLastRelease() {
        var lingers = TopicLingers<Int>(duration: .milliseconds(100))
        lingers.linger(1, at: at(0))
        lingers.linger(1, at: at(60))
        // The first linger's end is passed over: the second one counts.
        #expect(lingers.nextDeadline == at(100))
        #expect(lingers.expired(at: at(100)).isEmpty)
        #expect(lingers.nextDeadline == at(160))
        #expect(lingers.expired(at: at(160)) == [1])
    }

    /// Random schedules of releases (several topics, each released any number of times, at times that never go
    /// back) and checks of what expired, against a model that keeps each topic's last release: a topic comes out
    /// once its last release is `duration` old, once, in the order of those releases, and never before.
    @Test(arguments: 0..<200) func expiriesMatchAModelOfTheLastReleases(seed: UInt64) {
        var random = SeededGenerator(seed: 0x7109_11C5 &+ seed)
        let duration = Duration.milliseconds(Int.random(in: 1...50, using: &random))
        var lingers = TopicLingers<Int>(duration: duration)
        var lastRelease: [Int: ContinuousClock.Instant] = [:]
        var now = start
        for _ in 0..<Int.random(in: 1...300, using: &random) {
            now += .milliseconds(Int.random(in: 0...8, using: &random))
            if Bool.random(using: &random) {
                let topic = Int.random(in: 0..<12, using: &random)
                lingers.linger(topic, at: now)
                lastRelease[topic] = now
            } else {
                let expected = lastRelease.filter { $0.value + duration <= now }
                    .sorted { ($0.value, $0.key) < ($1.value, $1.key) }
                let got = lingers.expired(at: now)
                #expect(Set(got) == Set(expected.map(\.key)), "seed \(seed)")
                // In release order (two released at the same instant may come in either order of their keys).
                let releases = got.compactMap { lastRelease[$0] }
                #expect(releases == releases.sorted(), "seed \(seed)")
                for topic in got { lastRelease[topic] = nil }
            }
            #expect(lingers.count == lastRelease.count, "seed \(seed)")
            if let next = lingers.nextDeadline {
                // Never later than the first linger that counts.
                if let first = lastRelease.values.min() { #expect(next <= first + duration, "seed \(seed)") }
            } else {
                #expect(lastRelease.isEmpty, "seed \(seed)")
            }
        }
        now += duration
        #expect(Set(lingers.expired(at: now)) == Set(lastRelease.keys), "seed \(seed)")
        #expect(lingers.nextDeadline == nil)
    }
}
