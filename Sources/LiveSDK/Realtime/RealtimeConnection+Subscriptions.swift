// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import Synchronization
import WSClient

// Topics: references taken and released, subscriptions made (resuming from a checkpoint, or from a read), lingers.
extension RealtimeConnection {
    /// Takes a reference on `topic`; returns once the cloud answered the subscription, or at once when
    /// the connection is down or the topic was subscribed already (it is then subscribed on connect, and a
    /// ``RealtimeEvent/connected`` follows).
    /// - Returns: the cloud's `error` answer when it refused the subscription (then no reference is held).
    @discardableResult
    func acquire(_ topic: Topic) async -> RealtimeServerMessage? {
        let outcome = await acquire(topic, since: nil)
        if case .refused(let answer) = outcome { return answer }
        return nil
    }

    enum AcquireOutcome: Sendable {
        /// Subscribed now, or (not connected, or already subscribed) on its way: fetch to have the state.
        case subscribed
        /// Resumed from `since` with continuity proven: the missed events follow, then ``RealtimeEvent/caughtUp(_:)``.
        case resumed
        /// The cloud refused: no reference is held.
        case refused(RealtimeServerMessage)
    }

    /// Takes a reference on `topic`, resuming from `since` (a checkpoint the engine's cache holds) when it
    /// is the first: the cloud replays what came after it, and no fetch is needed.
    func acquire(_ topic: Topic, since: Int64?) async -> AcquireOutcome {
        await acquire([(topic, since)])[0]
    }

    /// ``acquire(_:since:)`` for many topics from one task: the subscriptions the first references need go out
    /// together (in batches, as any) and one wait takes every answer. A burst of observations activated at once
    /// (thousands told a cached copy, each resuming its topic from its checkpoint) thus costs one task, not one
    /// each, with its frames held until the cloud answers. Returns the outcomes in the order of `requests`.
    func acquire(_ requests: [(topic: Topic, since: Int64?)]) async -> [AcquireOutcome] {
        var outcomes = [AcquireOutcome](repeating: .subscribed, count: requests.count)
        var subscriptions: [(index: Int, topic: Topic, from: Int64?)] = []
        // Topics whose first acquirer's subscription is still unanswered: told "subscribed" once it is answered.
        var awaitingOthers: [Topic] = []
        for (index, (topic, since)) in requests.enumerated() {
            let first = !machine.wants(topic)
            let subscribeNow = machine.acquire(topic)
            if first, let since { machine.heard(since, of: topic) }
            if subscribeNow {
                // Listed at once: a later request for the same topic in `requests` waits for this answer too.
                subscribing[topic] = []
                subscriptions.append((index, topic, since.flatMap { _ in machine.heard(topic)?.seq }))
            } else if subscribing[topic] != nil {
                awaitingOthers.append(topic)
            }
        }
        let answers = await sendAll(subscriptions.map { (.subscribe, $0.topic, $0.from) })
        for (subscription, answer) in zip(subscriptions, answers) {
            for waiter in subscribing.removeValueShrinking(forKey: subscription.topic) ?? [] { waiter.resume() }
            switch took(answer, of: subscription.topic, resumingFrom: subscription.from) {
            case .noAnswer, .notResumed: outcomes[subscription.index] = .subscribed
            case .resumed: outcomes[subscription.index] = .resumed
            case .refused(let answer): outcomes[subscription.index] = .refused(answer)
            }
        }
        for topic in awaitingOthers {
            // Checked in the body: the call may suspend before running it, and the answer may come meanwhile.
            await withCheckedContinuation { waiter in
                if subscribing[topic] != nil { subscribing[topic]?.append(waiter) } else { waiter.resume() }
            }
        }
        return outcomes
    }

    private enum SubscribeAnswer {
        /// The link went down first: the topic is subscribed on connect.
        case noAnswer
        case resumed
        /// Subscribed from the cloud's head (no resumption asked for, or continuity not proven).
        case notResumed
        case refused(RealtimeServerMessage)
    }

    /// Sends the `subscribe` of a topic just acquired first (resuming from `resumeFrom`), holding later acquirers
    /// until the cloud answers, and takes in the answer.
    private func subscribe(_ topic: Topic, from resumeFrom: Int64?) async -> SubscribeAnswer {
        subscribing[topic] = []
        let answer = await sendAll([(.subscribe, topic, resumeFrom)])[0]
        for waiter in subscribing.removeValueShrinking(forKey: topic) ?? [] { waiter.resume() }
        return took(answer, of: topic, resumingFrom: resumeFrom)
    }

    /// Takes in the answer to the `subscribe` of a topic just acquired first (resuming from `resumeFrom`).
    private func took(_ answer: RealtimeServerMessage?, of topic: Topic, resumingFrom resumeFrom: Int64?) -> SubscribeAnswer {
        guard let answer else { return .noAnswer }
        if answer.op == .error {
            machine.abandon(topic)
            machine.forgetHeard(topic)
            return .refused(answer)
        }
        if let seq = answer.seq {
            if resumeFrom != nil && answer.resync != true && answer.replayed != nil { return .resumed }
            machine.heard(seq, of: topic)
        }
        return .notResumed
    }

    /// Those of `topics` that are held or linger (subscribed, or to be subscribed on connect).
    func held(_ topics: [Topic]) -> Set<Topic> { Set(topics.lazy.filter { self.machine.wants($0) }) }

    /// What ``acquire(_:readAsOf:)`` did.
    enum ReadSubscription: Sendable {
        /// Subscribed from the read: every event after it follows (the missed ones replayed), then
        /// ``RealtimeEvent/caughtUp(_:)``.
        case resumed
        /// The link is down: the topic is subscribed on connect, resuming from the read, and named in
        /// ``RealtimeEvent/connected(needRefresh:refused:)`` if the cloud cannot resume it.
        case deferred
        /// Subscribed, but the cloud could not resume from the read (or the topic was held already): what
        /// changed since the read may be missed, so read it again.
        case readAgain
        /// The cloud refused: no reference is held.
        case refused(RealtimeServerMessage)
    }

    /// Takes the first reference on `topic` for an object just read as of event `seq` (the cloud's batched read
    /// says which): its subscription resumes from the read, so the cloud replays what changed since, and the
    /// read needed no subscription before it (a burst of new observations is read in large batches at once,
    /// rather than each after its own subscription's answer).
    func acquire(_ topic: Topic, readAsOf seq: Int64) async -> ReadSubscription {
        guard !machine.wants(topic) else {
            if case .refused(let answer) = await acquire(topic, since: nil) { return .refused(answer) }
            return .readAgain
        }
        let subscribeNow = machine.acquire(topic)
        machine.heard(seq, of: topic)
        guard subscribeNow else { return .deferred }
        switch await subscribe(topic, from: seq) {
        case .noAnswer: return .deferred  // the link went down: resubscribed on connect, from `seq`
        case .resumed: return .resumed
        case .notResumed: return .readAgain
        case .refused(let answer): return .refused(answer)
        }
    }

    /// Reads of `topics` made as of event `seq` while their subscriptions had no baseline (the link was down or
    /// still connecting): each subscription made when the link is up resumes from its topic's first such read,
    /// so the cloud replays what changed after it (with continuity proven) instead of the engine fetching again
    /// after a resync notice. A topic with a baseline already, or no longer held, is left as it is.
    func read(_ topics: [Topic], asOf seq: Int64) {
        for topic in topics { machine.heardFirst(seq, of: topic) }
    }

    /// Drops a reference on `topic`. When it was the last, the topic lingers for a moment, still subscribed:
    /// a holder coming back meanwhile (a page move, an observer re-observing) takes it over with no gap.
    func release(_ topic: Topic) {
        guard machine.release(topic) == .linger else { return }
        lingering.topics.linger(topic, at: .now)
        guard !lingering.running else { return }
        lingering.running = true
        Task { await self.endLingers() }
    }

    /// Ends the lingers as they come due, the oldest first, until none is left: the topics no holder took back
    /// meanwhile are dropped, and their unsubscriptions go out together (nobody waits for their answers).
    private func endLingers() async {
        defer { lingering.running = false }
        while let deadline = lingering.topics.nextDeadline {
            try? await Task.sleep(until: deadline, clock: .continuous)
            var unsubscribing = false
            for topic in lingering.topics.expired(at: .now) {
                let outcome = machine.expire(topic)
                guard outcome.dropped else { continue }  // held again (what was heard of a dropped one went with it)
                wire.dropped(topic)
                if outcome.unsubscribe, writer != nil {
                    _ = wire.queue(.unsubscribe, topic)
                    unsubscribing = true
                }
            }
            if unsubscribing { await writeOutgoing() }
        }
    }
}
