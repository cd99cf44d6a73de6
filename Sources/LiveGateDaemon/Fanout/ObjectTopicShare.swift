// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveSDK
import NIOCore
import Synchronization

/// The part of one object's fan-out that runs on one event loop: the tokens of the connections that loop
/// serves, confined to it, and what is to be done for them, in order.
///
/// The topic queues operations (a change to deliver, a token to add or remove) from any thread; the first one
/// queued while none is pending schedules one task on the loop, which performs everything queued by then. So
/// each change costs one task per event loop (not one per token), each loop offers its own tokens' copies in
/// parallel with the other, and the references a delivery counts — the connection's outbox, the token's
/// prefix — are only ever counted on the thread that owns them. An operation queued before a connection's
/// answer is queued runs before it (both are tasks on the same loop, which runs its tasks in order): the order
/// between a token's notifications and its connection's answers is the order they were produced in.
///
/// Bounded: when the loop is so far behind that ``maxQueuedChanges`` changes wait, a new change replaces the
/// newest waiting one (object notifications are states, so the latest is what counts; each token's filter
/// compares against what it last received).
package final class ObjectTopicShare: Sendable {
    package enum Operation {
        case deliver(LiveObjectChange, ByteBuffer)
        /// A token joins and receives `last` (the topic's latest change) at once when its filter admits it,
        /// encoded then (a topic keeps its latest change, not its bytes, which only joins would use).
        /// `answer`, when given, is its connection's answer giving it its token, queued first: one task on the
        /// loop for an observation, not one for the answer and one for the join.
        case add(id: Int, ObjectTopic.Subscriber, last: LiveObjectChange?, answer: LoopAnswer? = nil)
        case remove(id: Int)

        /// Whether the operation needs a task of its own, scheduled when it is queued (a joining token: see
        /// ``ObjectTopicShare/submit(_:)``).
        var needsOwnTask: Bool { if case .add = self { true } else { false } }
    }

    private struct Queue {
        /// What is to be done, in order, in segments: each one is performed by one task on the loop, the
        /// first segment by the first task.
        var segments: [[Operation]] = []
        /// Changes waiting, in all segments.
        var changes = 0
        var replaced = 0
    }

    package static let maxQueuedChanges = 1024
    /// Up to this many tokens on a loop, a task offers a change's body as the engine encoded it rather than a copy
    /// of its own (``SharedBodies/append(_:adopting:)``).
    static let adoptingTokens = 8

    let eventLoop: any EventLoop
    private let subscribers: NIOLoopBoundBox<IDTable<ObjectTopic.Subscriber>>
    private let queue = Mutex(Queue())

    package init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        subscribers = .makeBoxSendingValue(IDTable(), eventLoop: eventLoop)
    }

    /// How many changes were replaced by newer ones before this loop delivered them.
    package var replacedChanges: Int { queue.withLock { $0.replaced } }

    /// Queues `operation` after those queued before it.
    ///
    /// A change or a removal joins the task already scheduled, when there is one: it may then be performed
    /// before tasks queued on the loop after that one (an answer, say), which only means a notification comes
    /// sooner, or a token's notifications stop sooner. A token that joins starts a segment and a task of its
    /// own, scheduled now: its notifications come after everything queued on the loop before it (its
    /// connection's answer giving it its token, above all).
    package func submit(_ operation: Operation) {
        let schedule = queue.withLock { queue -> Bool in
            if case .deliver = operation {
                if queue.changes >= Self.maxQueuedChanges, case .deliver? = queue.segments.last?.last {
                    queue.segments[queue.segments.count - 1].removeLast()
                    queue.segments[queue.segments.count - 1].append(operation)
                    queue.replaced += 1
                    return false
                }
                queue.changes += 1
            }
            if !operation.needsOwnTask, !queue.segments.isEmpty {
                queue.segments[queue.segments.count - 1].append(operation)
                return false
            }
            queue.segments.append([operation])
            return true
        }
        if schedule { eventLoop.execute { self.run() } }
    }

    /// Performs the first segment queued; on the loop.
    private func run() {
        let operations = queue.withLock { queue -> [Operation] in
            guard !queue.segments.isEmpty else { return [] }
            let segment: [Operation]
            if queue.segments.count == 1 {
                // Nothing kept once idle: an empty array that held a segment keeps its storage, per topic.
                segment = queue.segments[0]
                queue.segments = []
            } else {
                segment = queue.segments.removeFirst()
            }
            for operation in segment { if case .deliver = operation { queue.changes -= 1 } }
            return segment
        }
        var finished: [@Sendable () -> Void] = []
        var changes: [LiveObjectChange] = []
        var facts: [ObjectTopic.ChangeFacts] = []
        var bodies = SharedBodies()
        subscribers.withValue { table in
            // Copied into this loop's own buffer when many tokens here count references to it (one count shared
            // by both loops was a contended word); a few take it as it is.
            let adopting = table.count <= Self.adoptingTokens
            // The usual task, one change: no arrays.
            if operations.count == 1, case .deliver(let change, let body) = operations[0] {
                bodies.append(body, adopting: adopting)
                Self.deliver(CollectionOfOne(change), CollectionOfOne(ObjectTopic.ChangeFacts(change)), bodies, to: &table, finished: &finished)
                return
            }
            for operation in operations {
                if case .deliver(let change, let body) = operation {
                    changes.append(change)
                    facts.append(ObjectTopic.ChangeFacts(change))
                    bodies.append(body, adopting: adopting)
                    continue
                }
                // Changes waiting are delivered before a token joins or leaves.
                if !changes.isEmpty { Self.deliver(changes, facts, bodies, to: &table, finished: &finished) }
                changes.removeAll()
                facts.removeAll()
                bodies.removeAll()
                switch operation {
                case .deliver: break
                case .add(let id, var subscriber, let last, let answer):
                    if let answer { subscriber.outbox.enqueueOnLoop(answer.bytes()) }
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
                    if subscriber.filter.finished {
                        finished.append(subscriber.onFinished)
                    } else {
                        table.insert(subscriber, id: id)
                    }
                case .remove(let id): table.remove(id)
                }
            }
            if !changes.isEmpty { Self.deliver(changes, facts, bodies, to: &table, finished: &finished) }
        }
        for callback in finished { callback() }
    }

    /// Offers `changes` to every token of this loop, each the ones its filter admits, in order; once-tokens
    /// that fired leave. Token by token, not change by change: a token's changes are queued with one lock on
    /// its connection's outbox, so a loop that fell behind catches up with less work per change.
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
