// Licensed under the Apache License, Version 2.0.

import LiveSDK
import NIOCore
import Synchronization

/// The part of one topic's fan-out that runs on one event loop: the tokens of the connections that loop serves,
/// confined to it, and what is to be done for them, in order. Every kind of notification takes this path: an
/// object's topic (``ObjectTopic``), and the windows, feeds and streams (``TokenFanout``); the kind
/// (``FanoutKind``) says what a token is and how a change reaches it.
///
/// Operations (a change to deliver, a token to add, open or remove) are queued from any thread; the first one
/// queued while none is pending schedules one task on the loop, which performs everything queued by then. So a
/// change costs one task per event loop (not one per token), each loop offers its own tokens' copies in parallel
/// with the other, and the references a delivery counts (the connection's outbox, the token's prefix) are only
/// ever counted on the thread that owns them. An operation queued before a connection's answer is queued runs
/// before it (both are tasks on the same loop, which runs its tasks in order): the order between a token's
/// notifications and its connection's answers is the order they were produced in.
///
/// Bounded: when the loop is so far behind that ``maxQueuedChanges`` changes wait, a kind whose changes are
/// states (``FanoutKind/replacesWhenBehind``) has the newest waiting one replaced by a new one; the others' changes
/// queue on, and the connection's outbox cuts a client too slow for them off.
package final class FanoutShare<Kind: FanoutKind>: Sendable {
    package enum Operation: Sendable {
        /// A change and its body, encoded once, for every token of the share (`to` nil) or for those named.
        case deliver(Kind.Change, ByteBuffer, to: [Int]? = nil)
        /// A token joins and is offered `last` (its topic's latest change) at once. `answer`, when given, is its
        /// connection's answer giving it its token, queued first: one task on the loop for a subscription, not
        /// one for the answer and one for the join.
        case add(id: Int, Kind.Member, last: Kind.Change? = nil, answer: LoopAnswer? = nil)
        /// A token added held (``FanoutKind/open(_:)``) is let through: `answer` first, when given, then what
        /// it was held.
        case open(id: Int, answer: LoopAnswer? = nil)
        case remove(id: Int)

        /// Whether the operation needs a task of its own, scheduled when it is queued (a joining or opening
        /// token: see ``FanoutShare/submit(_:)``).
        var needsOwnTask: Bool {
            switch self {
            case .add, .open: true
            case .deliver, .remove: false
            }
        }
    }

    private struct Queue {
        /// What is to be done, in order, in segments: each one is performed by one task on the loop, the
        /// first segment by the first task.
        var segments: [[Operation]] = []
        /// Changes waiting, in all segments.
        var changes = 0
        var replaced = 0
    }

    package static var maxQueuedChanges: Int { 1024 }
    /// Up to this many tokens on a loop, a task offers a change's body as the engine encoded it rather than a copy
    /// of its own (``SharedBodies/append(_:adopting:)``).
    static var adoptingTokens: Int { 8 }

    let eventLoop: any EventLoop
    private let members: NIOLoopBoundBox<IDTable<Kind.Member>>
    private let queue = Mutex(Queue())

    package init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        members = .makeBoxSendingValue(IDTable(), eventLoop: eventLoop)
    }

    /// How many changes were replaced by newer ones before this loop delivered them.
    package var replacedChanges: Int { queue.withLock { $0.replaced } }

    /// Queues `operation` after those queued before it.
    ///
    /// A change or a removal joins the task already scheduled, when there is one: it may then be performed
    /// before tasks queued on the loop after that one (an answer, say), which only means a notification comes
    /// sooner, or a token's notifications stop sooner. A token that joins or opens starts a segment and a task of
    /// its own, scheduled now: its notifications come after everything queued on the loop before it (its
    /// connection's answer giving it its token, above all).
    package func submit(_ operation: Operation) {
        let schedule = queue.withLock { queue -> Bool in
            if case .deliver = operation {
                if Kind.replacesWhenBehind, queue.changes >= Self.maxQueuedChanges, case .deliver? = queue.segments.last?.last {
                    queue.segments[queue.segments.count - 1].removeLast()
                    queue.segments[queue.segments.count - 1].append(operation)
                    queue.replaced += 1
                    return false
                }
                // One emission for one token after another (a window's observers, a feed's or a stream's
                // listeners): one delivery, its body offered from one place.
                if case .deliver(let change, _, let ids?) = operation, let segment = queue.segments.indices.last,
                    case .deliver(let previous, _, _?)? = queue.segments[segment].last, Kind.isSame(change, as: previous),
                    case .deliver(_, let body, var targets?) = queue.segments[segment].removeLast()
                {
                    targets.append(contentsOf: ids)
                    queue.segments[segment].append(.deliver(previous, body, to: targets))
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
        var changes: [Kind.Change] = []
        var targets: [[Int]?] = []
        var bodies = SharedBodies()
        members.withValue { table in
            // Copied into this loop's own buffer when many tokens here count references to it (one count shared
            // by both loops was a contended word); a few take it as it is.
            let adopting = table.count <= Self.adoptingTokens
            // The usual task, one change: no arrays.
            if operations.count == 1, case .deliver(let change, let body, let target) = operations[0] {
                bodies.append(body, adopting: adopting)
                Kind.deliver(CollectionOfOne(change), bodies, targets: CollectionOfOne(target), to: &table, finished: &finished)
                return
            }
            for operation in operations {
                if case .deliver(let change, let body, let target) = operation {
                    changes.append(change)
                    targets.append(target)
                    bodies.append(body, adopting: adopting)
                    continue
                }
                // Changes waiting are delivered before a token joins, opens or leaves.
                if !changes.isEmpty { Kind.deliver(changes, bodies, targets: targets, to: &table, finished: &finished) }
                changes.removeAll()
                targets.removeAll()
                bodies.removeAll()
                switch operation {
                case .deliver: break
                case .add(let id, var member, let last, let answer):
                    if let answer { Kind.outbox(of: member).enqueueOnLoop(answer.bytes()) }
                    if Kind.join(&member, last: last) {
                        table.insert(member, id: id)
                    } else if let done = Kind.finished(member) {
                        finished.append(done)
                    }
                case .open(let id, let answer):
                    table.update(id) { member in
                        if let answer { Kind.outbox(of: member).enqueueOnLoop(answer.bytes()) }
                        Kind.open(&member)
                    }
                case .remove(let id): table.remove(id)
                }
            }
            if !changes.isEmpty { Kind.deliver(changes, bodies, targets: targets, to: &table, finished: &finished) }
        }
        for callback in finished { callback() }
    }
}

/// One kind of notification on the fan-out's path (``FanoutShare``): what a token is, what a change is, and the
/// kind's delivery policy: objects coalesce to their latest state, windows reset to a full state, feeds and
/// streams never coalesce.
package protocol FanoutKind {
    /// One token, confined to its connection's loop.
    associatedtype Member: Sendable
    /// What the engine emitted, beside its body (encoded once for every token).
    associatedtype Change: Sendable

    /// Whether a loop far behind may replace its newest waiting change by a newer one: for states, whose latest
    /// is all a token needs.
    static var replacesWhenBehind: Bool { get }

    /// The connection's outbox a token's notifications go to.
    static func outbox(of member: Member) -> ConnectionOutbox

    /// A token joins, its answer queued already, and is offered `last`, its topic's latest change, when there
    /// is one. `false`: it has had what it was for (a once-token) and does not stay.
    static func join(_ member: inout Member, last: Change?) -> Bool

    /// A token added held is let through: what it was held is offered, in order.
    static func open(_ member: inout Member)

    /// Offers `changes` in order (with their bodies, at the same positions), each to the tokens its targets name
    /// or, when they are `nil`, to every token; tokens that have had what they were for leave, and their callbacks
    /// are added to `finished`.
    static func deliver<Changes: RandomAccessCollection<Change>, Targets: RandomAccessCollection<[Int]?>>(
        _ changes: Changes,
        _ bodies: SharedBodies,
        targets: Targets,
        to table: inout IDTable<Member>,
        finished: inout [@Sendable () -> Void]
    ) where Changes.Index == Int, Targets.Index == Int

    /// Whether two changes queued one after the other are one emission (the same body and the same policy for
    /// every token), so that their deliveries are one.
    static func isSame(_ change: Change, as previous: Change) -> Bool

    /// What is called once a token has had what it was for (its connection forgets it); `nil`: nothing.
    static func finished(_ member: Member) -> (@Sendable () -> Void)?
}
