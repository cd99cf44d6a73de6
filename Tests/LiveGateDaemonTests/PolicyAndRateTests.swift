// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
import LiveGateDaemon
import Testing

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

    @Test func supplementaryGroupsCountLikeThePrimaryGroup() {
        var policy = AccessPolicy()
        policy.allowedGroups = [50]
        policy.readOnlyGroups = [60]
        // A user added with `usermod -aG`: the group is supplementary, the primary group is the user's own.
        #expect(policy.decide(uid: 1001, gid: 1001, groups: [27, 50]) == .readWrite)
        #expect(policy.decide(uid: 1001, gid: 1001, groups: [50, 60]) == .readOnly)
        guard case .refused(let reason) = policy.decide(uid: 1002, gid: 1002, groups: [27]) else {
            Issue.record("uid 1002 is in no allowed group")
            return
        }
        #expect(reason.contains("groups 27, 1002"), "\(reason)")
    }

    @Test func administratorsAreRootTheDaemonsUserAndTheListed() {
        var policy = AccessPolicy()
        #expect(policy.mayAdminister(uid: 0, gid: 0, daemonUID: 999))
        #expect(policy.mayAdminister(uid: 999, gid: 999, daemonUID: 999))
        #expect(!policy.mayAdminister(uid: 1000, gid: 1000, groups: [4], daemonUID: 999))
        policy.adminGroups = [4]
        #expect(policy.mayAdminister(uid: 1000, gid: 1000, groups: [4], daemonUID: 999))
        policy.adminUsers = [1001]
        #expect(policy.mayAdminister(uid: 1001, gid: 1001, daemonUID: 999))
    }

    @Test func peerGroupsAreReadFromTheKernelsSortedList() {
        func buffer(_ groups: [UInt32]) -> InlineArray<256, UInt32> {
            var buffer = InlineArray<256, UInt32>(repeating: 0)
            for (index, gid) in groups.enumerated() { buffer[index] = gid }
            return buffer
        }
        #expect(PeerCredentials.groups(in: buffer([])) == [])
        #expect(PeerCredentials.groups(in: buffer([27, 100, 1001])) == [27, 100, 1001])
        #expect(PeerCredentials.groups(in: buffer([0, 4, 27])) == [0, 4, 27], "group 0 is first when a peer has it")
        #expect(PeerCredentials.groups(in: buffer(Array(1...256))) == Array(1...256))
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
