// Licensed under the Apache License, Version 2.0.

import LiveGateCloud
import Testing

/// ``LoginThrottle``: free failures, then waits doubling to a bound; per name and per address; cleared by a
/// success; forgotten after a while; 0 free failures throttles nothing.
@Suite struct LoginThrottleTests {
    let start = ContinuousClock.now

    @Test func failuresBeyondTheFreeOnesWaitLongerAndLonger() {
        var throttle = LoginThrottle(freeFailures: 5)
        for n in 0..<5 {
            #expect(throttle.wait(user: "alice", address: "10.0.0.1", now: start) == nil, "free failure \(n)")
            throttle.failed(user: "alice", address: "10.0.0.1", now: start)
        }
        #expect(throttle.wait(user: "alice", address: "10.0.0.1", now: start) == nil, "five failures: the sixth is tried")
        var now = start
        var waits: [Duration] = []
        for _ in 0..<12 {
            throttle.failed(user: "alice", address: "10.0.0.1", now: now)
            let wait = throttle.wait(user: "alice", address: "10.0.0.1", now: now) ?? .zero
            waits.append(wait)
            now += wait
            #expect(throttle.wait(user: "alice", address: "10.0.0.1", now: now) == nil, "tried again once the wait is over")
        }
        #expect(Array(waits.prefix(9)) == [1, 2, 4, 8, 16, 32, 64, 128, 256].map { Duration.seconds($0) })
        #expect(waits.suffix(3).allSatisfy { $0 == .seconds(300) }, "bounded: \(waits)")
    }

    @Test func aNameAndAnAddressAreCountedApartAndASuccessClearsBoth() {
        var throttle = LoginThrottle(freeFailures: 2)
        for n in 0..<3 { throttle.failed(user: "u\(n)", address: "10.0.0.9", now: start) }
        #expect(throttle.wait(user: "someone", address: "10.0.0.9", now: start) == .seconds(1), "the address guessed three names")
        #expect(throttle.wait(user: "someone", address: "10.0.0.8", now: start) == nil)
        for _ in 0..<3 { throttle.failed(user: "bob", address: nil, now: start) }
        #expect(throttle.wait(user: "bob", address: "10.0.0.7", now: start) == .seconds(1), "bob was guessed from anywhere")
        throttle.succeeded(user: "bob", address: "10.0.0.9")
        #expect(throttle.wait(user: "bob", address: "10.0.0.9", now: start) == nil)
    }

    @Test func failuresAreForgottenAndZeroFreeFailuresThrottlesNothing() {
        var throttle = LoginThrottle(freeFailures: 1)
        throttle.failed(user: "alice", address: nil, now: start)
        throttle.failed(user: "alice", address: nil, now: start)
        #expect(throttle.wait(user: "alice", address: nil, now: start) != nil)
        let later = start + LoginThrottle.forgetAfter
        throttle.failed(user: "alice", address: nil, now: later)
        #expect(throttle.wait(user: "alice", address: nil, now: later) == nil, "counted anew after \(LoginThrottle.forgetAfter)")

        var open = LoginThrottle(freeFailures: 0)
        for _ in 0..<100 { open.failed(user: "alice", address: "10.0.0.1", now: start) }
        #expect(open.wait(user: "alice", address: "10.0.0.1", now: start) == nil && open.users.isEmpty)
    }

    @Test func manyNamesKeepABoundedRecord() {
        var throttle = LoginThrottle(freeFailures: 5)
        for n in 0..<(LoginThrottle.maxRecords + 10) { throttle.failed(user: "u\(n)", address: nil, now: start + .milliseconds(n)) }
        #expect(throttle.users.count <= LoginThrottle.maxRecords)
        #expect(throttle.users["u\(LoginThrottle.maxRecords + 9)"] != nil, "the newest kept")
    }
}
