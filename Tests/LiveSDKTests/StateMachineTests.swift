// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveSDK
import Testing

@Suite struct SessionStateMachineTests {
    let start = ContinuousClock.now

    @Test func firstRequestStartsOneLogin() {
        var machine = SessionStateMachine()
        #expect(machine.tokenNeeded(now: start) == .startLogin)
        #expect(machine.state == .establishing)
        #expect(machine.tokenNeeded(now: start) == .waitForLogin)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), now: start)
        #expect(machine.state == .established)
        #expect(machine.tokenNeeded(now: start + .seconds(10)) == .useToken("t1"))
    }

    @Test func tokenIsRenewedBeforeItExpires() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), now: start)
        // 10 % margin: at 95 s the token is treated as expired already.
        #expect(machine.tokenNeeded(now: start + .seconds(95)) == .startLogin)
        #expect(machine.state == .establishing)
    }

    @Test func rejectedTokenLeadsToANewLogin() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), now: start)
        machine.tokenRejected("other")
        #expect(machine.state == .established, "a stale rejection is ignored")
        machine.tokenRejected("t1")
        #expect(machine.state == .tokenExpired)
        #expect(machine.tokenNeeded(now: start) == .startLogin)
    }

    @Test func anExpiredTokenIsRenewedWithTheRefreshToken() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), refreshToken: "r1", refreshLifetime: .seconds(1000), now: start)
        #expect(machine.tokenNeeded(now: start + .seconds(95)) == .startRefresh("r1"))
        #expect(machine.state == .establishing)
        #expect(machine.tokenNeeded(now: start + .seconds(95)) == .waitForLogin, "one renewal at a time")
        machine.loginSucceeded(token: "t2", lifetime: .seconds(100), refreshToken: "r2", refreshLifetime: .seconds(1000), now: start + .seconds(95))
        #expect(machine.tokenNeeded(now: start + .seconds(100)) == .useToken("t2"))
    }

    @Test func aRejectedTokenIsRenewedWithTheRefreshToken() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), refreshToken: "r1", refreshLifetime: .seconds(1000), now: start)
        machine.tokenRejected("t1")
        #expect(machine.tokenNeeded(now: start) == .startRefresh("r1"))
    }

    @Test func aRefusedRefreshFallsBackToLogin() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), refreshToken: "r1", refreshLifetime: .seconds(1000), now: start)
        machine.tokenRejected("t1")
        _ = machine.tokenNeeded(now: start)
        machine.refreshRefused()
        #expect(machine.state == .tokenExpired)
        #expect(machine.tokenNeeded(now: start) == .startLogin)
    }

    @Test func anExpiredRefreshTokenIsNotTried() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginSucceeded(token: "t1", lifetime: .seconds(100), refreshToken: "r1", refreshLifetime: .seconds(200), now: start)
        #expect(machine.tokenNeeded(now: start + .seconds(300)) == .startLogin)
    }

    @Test func refusedCredentialsTerminate() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.credentialsRefused(reason: "bad password")
        #expect(machine.state == .terminated)
        #expect(machine.tokenNeeded(now: start) == .fail(reason: "bad password"))
        machine.reset()
        #expect(machine.tokenNeeded(now: start) == .startLogin)
    }

    @Test func transientFailureRetriesOnNextRequest() {
        var machine = SessionStateMachine()
        _ = machine.tokenNeeded(now: start)
        machine.loginFailedTransiently()
        #expect(machine.state == .notLoggedIn)
        #expect(machine.tokenNeeded(now: start) == .startLogin)
    }
}

@Suite struct RealtimeConnectionStateMachineTests {
    let a = Topic.object(EntityKey(collection: "notes", id: "a"))
    let b = Topic.object(EntityKey(collection: "notes", id: "b"))

    @Test func topicsAreReferenceCounted() {
        var machine = RealtimeConnectionStateMachine()
        machine.connectionStarted()
        _ = machine.connectionEstablished()
        #expect(machine.acquire(a) == true, "first reference subscribes")
        #expect(machine.acquire(a) == false)
        #expect(machine.release(a) == .held)
        #expect(machine.release(a) == .linger, "the last reference leaves the topic lingering")
        #expect(machine.release(a) == .notHeld, "releasing an unheld topic does nothing")
        #expect(machine.wantedTopics == [a], "still subscribed while it lingers")
        #expect(machine.wants(a) && !machine.wants(b))
        #expect(machine.expire(a) == (true, true), "the linger over, it is unsubscribed")
        #expect(machine.wantedTopics.isEmpty)
        #expect(!machine.wants(a))
    }

    @Test func howFarATopicWasHeardIsKeptWhileItIsWantedAndGoesWithIt() {
        var machine = RealtimeConnectionStateMachine()
        machine.heard(5, of: a)
        machine.heardEvent(6, of: a)
        #expect(machine.heard(a) == nil, "nothing is kept of a topic not wanted")
        _ = machine.acquire(a)
        #expect(machine.heard(a) == .init(seq: nil, eventSeq: nil))
        machine.heardFirst(10, of: a)
        machine.heardFirst(8, of: a)
        #expect(machine.heard(a)?.seq == 10, "only the first read sets where it resumes from")
        machine.heard(7, of: a)
        #expect(machine.heard(a)?.seq == 10, "never back")
        machine.heardEvent(12, of: a)
        #expect(machine.heard(a) == .init(seq: 12, eventSeq: 12))
        machine.heardEvent(11, of: a)
        #expect(machine.heard(a) == .init(seq: 12, eventSeq: 11), "the last event handed on, whatever its order")
        #expect(machine.heard(b) == nil)
        #expect(machine.release(a) == .linger)
        #expect(machine.heard(a)?.seq == 12, "kept while it lingers (still subscribed)")
        machine.forgetHeard(a)
        #expect(machine.heard(a) == .init(seq: nil, eventSeq: nil), "a subscription that ended starts afresh")
        machine.heard(20, of: a)
        _ = machine.expire(a)
        _ = machine.acquire(a)
        #expect(machine.heard(a) == .init(seq: nil, eventSeq: nil), "dropped with the topic")
        machine.heard(30, of: a)
        _ = machine.acquire(a)
        machine.abandon(a)
        #expect(machine.heard(a)?.seq == 30, "a refused second holder leaves the first's")
        machine.abandon(a)
        #expect(machine.heard(a) == nil)
    }

    @Test func aTopicTakenBackWhileItLingersNeedsNoNewSubscription() {
        var machine = RealtimeConnectionStateMachine()
        machine.connectionStarted()
        _ = machine.connectionEstablished()
        #expect(machine.acquire(a) == true)
        #expect(machine.release(a) == .linger)
        #expect(machine.acquire(a) == false, "still subscribed: no subscribe, no gap")
        #expect(machine.expire(a) == (false, false), "held again: the old linger's end does nothing")
        #expect(machine.wantedTopics == [a])
    }

    @Test func aSubscriptionTheCloudEndedIsMadeAgainByTheNextHolder() {
        var machine = RealtimeConnectionStateMachine()
        machine.connectionStarted()
        _ = machine.connectionEstablished()
        #expect(machine.acquire(a) == true)
        machine.subscriptionEnded(a)
        #expect(machine.wantedTopics == [a], "its holders keep their references")
        #expect(machine.acquire(a) == true, "a new holder subscribes again")
        #expect(machine.acquire(a) == false, "once")
        machine.subscriptionEnded(a)
        #expect(machine.release(a) == .held)
        #expect(machine.release(a) == .held)
        #expect(machine.release(a) == .linger)
        #expect(machine.expire(a) == (true, false), "nothing to unsubscribe: the cloud ended it")
        machine.subscriptionEnded(b)
        #expect(machine.acquire(b) == true, "an unheld topic is unaffected")
    }

    @Test func topicsWantedWhileDisconnectedAreSubscribedOnConnect() {
        var machine = RealtimeConnectionStateMachine()
        #expect(machine.acquire(a) == false)
        #expect(machine.acquire(b) == false)
        machine.connectionStarted()
        #expect(machine.status == .connecting)
        #expect(machine.connectionEstablished() == [a, b])
        #expect(machine.status == .connected)
    }

    @Test func reconnectBacksOffExponentiallyWithJitter() {
        var machine = RealtimeConnectionStateMachine()
        machine.connectionStarted()
        var delays: [Duration] = []
        for _ in 0..<12 {
            delays.append(machine.connectionLost(jitter: 0.5))
            #expect(machine.status == .reconnecting)
            machine.connectionStarted()
        }
        #expect(delays[0] == .milliseconds(100))
        #expect(delays[1] == .milliseconds(200))
        #expect(delays[2] == .milliseconds(400))
        #expect(delays.last == .seconds(30), "capped")
        #expect(RealtimeConnectionStateMachine.backoff(attempt: 1, jitter: 0) == .milliseconds(80))
        #expect(RealtimeConnectionStateMachine.backoff(attempt: 1, jitter: 1) == .milliseconds(120))
        _ = machine.connectionEstablished()
        #expect(machine.connectionLost(jitter: 0.5) == .milliseconds(100), "a good connection resets the backoff")
    }
}
