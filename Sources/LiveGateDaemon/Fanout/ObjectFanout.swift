// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveSDK
import NIOCore

/// An object topic's share of one event loop.
package typealias ObjectTopicShare = FanoutShare<ObjectFanout>

/// Objects on the fan-out's path: a change is a state, offered to each token its filter admits; a token behind
/// gets the latest (its outbox coalesces), and a loop far behind replaces its newest waiting change.
package enum ObjectFanout: FanoutKind {
    package static var replacesWhenBehind: Bool { true }

    package static func outbox(of member: ObjectTopic.Subscriber) -> ConnectionOutbox { member.outbox }

    /// Each change of an object is a state of its own.
    package static func isSame(_ change: LiveObjectChange, as previous: LiveObjectChange) -> Bool { false }

    package static func finished(_ member: ObjectTopic.Subscriber) -> (@Sendable () -> Void)? { member.onFinished }

    /// Offers `last` when the token's filter admits it, encoded then (a topic keeps its latest change, not its
    /// bytes, which only joins would use); a re-observation is told first that it missed versions, or only that
    /// the version it holds is confirmed.
    package static func join(_ subscriber: inout ObjectTopic.Subscriber, last: LiveObjectChange?) -> Bool {
        // The change was encoded when it was emitted (and logged there had that failed).
        if let last, subscriber.admits(last), let body = try? NotificationFrame.body(ObjectChangedBody(last)) {
            if let notice = subscriber.gapNotice(before: last) {
                subscriber.outbox.offerOnLoop(token: subscriber.token, prefix: subscriber.prefix, body: notice)
            }
            subscriber.outbox.offerOnLoop(token: subscriber.token, prefix: subscriber.prefix, body: body)
            subscriber.sinceVersion = nil  // told something: what follows is told whatever its version
        } else if let last, let notice = subscriber.confirmation(ObjectTopic.ChangeFacts(last)) {
            subscriber.outbox.offerOnLoop(token: subscriber.token, prefix: subscriber.prefix, body: notice)
        }
        return !subscriber.filter.finished
    }

    /// Object tokens are never held: they join once their answer is queued.
    package static func open(_ subscriber: inout ObjectTopic.Subscriber) {}

    /// Offers `changes` to every token of this loop, each the ones its filter admits, in order; once-tokens
    /// that fired leave. Token by token, not change by change: a token's changes are queued with one lock on
    /// its connection's outbox, so a loop that fell behind catches up with less work per change.
    package static func deliver<Changes: RandomAccessCollection<LiveObjectChange>, Targets: RandomAccessCollection<[Int]?>>(
        _ changes: Changes,
        _ bodies: SharedBodies,
        targets: Targets,
        to table: inout IDTable<ObjectTopic.Subscriber>,
        finished: inout [@Sendable () -> Void]
    ) where Changes.Index == Int, Targets.Index == Int {
        // What the tokens' decisions depend on, once per change.
        if changes.count == 1 {
            deliver(changes, CollectionOfOne(ObjectTopic.ChangeFacts(changes[changes.startIndex])), bodies, to: &table, finished: &finished)
        } else {
            deliver(changes, changes.map(ObjectTopic.ChangeFacts.init), bodies, to: &table, finished: &finished)
        }
    }

    private static func deliver<Changes: RandomAccessCollection<LiveObjectChange>, Facts: RandomAccessCollection<ObjectTopic.ChangeFacts>>(
        _ changes: Changes,
        _ facts: Facts,
        _ bodies: SharedBodies,
        to table: inout IDTable<ObjectTopic.Subscriber>,
        finished: inout [@Sendable () -> Void]
    ) where Changes.Index == Int, Facts.Index == Int {
        var finishedIDs: [Int] = []
        var admitted: [Int] = []
        admitted.reserveCapacity(changes.count)
        // Each subscriber in place; the changes, too, are read in place by index: a copy of one counts
        // references inside it, which both loops share.
        table.updateEach { id, subscriber in
            admitted.removeAll(keepingCapacity: true)
            for position in facts.indices {
                // Most tokens decide from the facts; only a stateful filter (fields, once) reads the change.
                if subscriber.admits(facts[position]) ?? subscriber.filter.admit(changes[position]) {
                    admitted.append(position)
                    // Told something: what follows is told whatever its version (``ObjectTopic/Subscriber/sinceVersion``).
                    if subscriber.sinceVersion != nil { subscriber.sinceVersion = nil }
                } else if subscriber.sinceVersion != nil, let notice = subscriber.confirmation(facts[position]) {
                    // Nothing admitted before it (an admission clears `sinceVersion`): it goes first.
                    subscriber.outbox.offerOnLoop(token: subscriber.token, prefix: subscriber.prefix, body: notice)
                }
            }
            guard !admitted.isEmpty else { return }
            if subscriber.checksSinceGap, let notice = subscriber.gapNotice(before: changes[admitted[0]]) {
                subscriber.outbox.offerOnLoop(token: subscriber.token, prefix: subscriber.prefix, body: notice)
            }
            subscriber.outbox.offerOnLoop(
                token: subscriber.token,
                prefix: subscriber.prefix,
                bodies: bodies,
                admitted: admitted.count == bodies.count ? nil : admitted
            )
            if subscriber.filter.finished { finishedIDs.append(id) }
        }
        for id in finishedIDs {
            if let subscriber = table.remove(id) { finished.append(subscriber.onFinished) }
        }
    }
}
