// Licensed under the Apache License, Version 2.0.

import Testing

@testable import LiveGateDaemon

@Suite struct AccessPolicyTests {
    @Test func withoutAllowListsEveryoneReadsAndWrites() {
        #expect(AccessPolicy().decide(uid: 1000, gid: 1000) == .readWrite)
    }

    @Test func allowListsAdmitByUserOrPrimaryGroup() {
        var policy = AccessPolicy()
        policy.allowedUsers = [1000]
        policy.allowedGroups = [50]
        #expect(policy.decide(uid: 1000, gid: 1) == .readWrite)
        #expect(policy.decide(uid: 7, gid: 50) == .readWrite)
        guard case .refused(let reason) = policy.decide(uid: 7, gid: 7) else {
            Issue.record("uid 7 must be refused")
            return
        }
        #expect(reason.contains("uid 7"))
    }

    @Test func readOnlyListsLimitToObserving() {
        var policy = AccessPolicy()
        policy.readOnlyGroups = [100]
        #expect(policy.decide(uid: 1, gid: 100) == .readOnly)
        #expect(policy.decide(uid: 1, gid: 101) == .readWrite)
    }

    @Test func namesResolveAndUnknownNamesAreErrors() throws {
        #expect(try AccessPolicy.users("root, 4242") == [0, 4242])
        #expect(throws: ConfigError.self) { try AccessPolicy.groups("no-such-group-here") }
    }
}

@Suite struct RequestRateTests {
    @Test func aBurstUpToTheRateThenRefillOverTime() {
        var rate = RequestRate(perSecond: 3)
        let start = ContinuousClock.now
        #expect((0..<4).map { _ in rate.admit(now: start) } == [true, true, true, false])
        #expect(rate.admit(now: start + .milliseconds(340)) == true, "a third of a second refills one")
        #expect(rate.admit(now: start + .milliseconds(340)) == false)
        #expect((0..<4).map { _ in rate.admit(now: start + .seconds(10)) } == [true, true, true, false], "never more than the burst")
    }
}
