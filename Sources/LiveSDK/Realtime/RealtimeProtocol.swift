// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// The realtime protocol's state on one connection and across its reconnections: the requests (their refs, the
/// batch in flight, the answers), the resumptions awaiting their ack and the replays under way. Pure: each
/// event (a request queued, a batch written or not, a message from the cloud, the connection lost) returns the
/// actions to perform; the connection (``RealtimeConnection``) does the I/O. The topics wanted and how far each
/// was heard are the ``RealtimeConnectionStateMachine``'s, which a message from the cloud updates too.
///
/// Requests go out a batch at a time: the next once the cloud has answered the last request of the one before.
/// Every request that a caller waits for gets exactly one answer: the cloud's, or `nil` when the request was
/// not written or the connection went down before the answer came.
package struct RealtimeProtocol: Sendable {
    package enum Action: Equatable, Sendable {
        /// Tell the engine.
        case emit(RealtimeEvent)
        /// The answer to request `ref`, for the caller waiting for it (`nil`: none will come).
        case answer(ref: Int64, RealtimeServerMessage?)
        /// The batch in flight was answered and requests wait: write the next batch.
        case writeNext
    }

    /// What a caller waiting for a request's answer has now.
    package enum Wait: Equatable, Sendable {
        case answered(RealtimeServerMessage)
        /// None will come: the request was not written, or the connection it was written on is gone.
        case noAnswer
        /// It comes later, as an ``Action/answer(ref:_:)``.
        case pending
    }

    package private(set) var lastRef: Int64 = 0
    /// Counts connections lost: a request written on an earlier connection gets no answer on a later one.
    package private(set) var generation = 0
    /// The last request of the batch in flight, until the cloud answers it.
    package private(set) var awaitedRef: Int64?
    private var outgoing: [RealtimeClientMessage] = []
    /// Requests whose answer a caller waits for.
    private var waited: Set<Int64> = []
    /// Unsubscriptions: nobody waits for their answer.
    private var unawaited: Set<Int64> = []
    /// Requests not written before their caller waited for them.
    private var notWritten: Set<Int64> = []
    /// Answers that came before their caller waited (it was still writing its batch).
    private var earlyAnswers: [Int64: RealtimeServerMessage] = [:]
    /// Resuming subscriptions whose ack has not come yet, by ref.
    private var resuming: [Int64: Topic] = [:]
    /// The last ref queued before the connection was last lost: those requests were answered then.
    private var lostThrough: Int64 = 0
    /// Replayed events still to come per resumed topic (from the ack's `replayed`).
    private var replayRemaining: [Topic: Int] = [:]

    package init() {}

    /// Whether requests wait to be written.
    package var hasOutgoing: Bool { !outgoing.isEmpty }

    /// Queues a request for the next batch; returns its ref. A `subscribe` with `since` resumes: its ack says
    /// how many events its replay brings, and ``RealtimeEvent/caughtUp(_:)`` follows the last.
    package mutating func queue(_ op: RealtimeClientMessage.Operation, _ topic: Topic, since: Int64? = nil) -> Int64 {
        lastRef += 1
        outgoing.append(RealtimeClientMessage(op: op, ref: lastRef, topic: topic, since: since))
        if op == .subscribe, since != nil { resuming[lastRef] = topic }
        if op == .unsubscribe { unawaited.insert(lastRef) }
        return lastRef
    }

    /// The next batch to write, when one may go now (no batch awaits its answer): as many requests as the
    /// cloud takes in one message, by count and by size. The batch is in flight from then on.
    package mutating func nextBatch() -> [RealtimeClientMessage]? {
        guard awaitedRef == nil, !outgoing.isEmpty else { return nil }
        var batch: [RealtimeClientMessage] = []
        var bytes = 32
        for request in outgoing.prefix(RealtimeClientBatch.maximumRequests) {
            bytes += request.topic.description.utf8.count + 80
            if !batch.isEmpty && bytes > RealtimeClientBatch.maximumBytes / 2 { break }
            batch.append(request)
        }
        outgoing.removeFirst(batch.count)
        if outgoing.isEmpty { outgoing = [] }  // the storage a burst grew it to, given back
        awaitedRef = batch.last?.ref
        return batch
    }

    /// `batch` (from ``nextBatch()``) was not written (no connection, or the write failed): no answer will come
    /// for its requests, and the next batch may go.
    package mutating func notWritten(_ batch: [RealtimeClientMessage]) -> [Action] {
        if let last = batch.last?.ref, awaitedRef == last { awaitedRef = nil }
        var actions: [Action] = []
        // A batch whose write failed after the connection was lost: its requests were answered with the loss.
        for request in batch where request.ref > lostThrough {
            resuming.removeValueShrinking(forKey: request.ref)
            if request.op == .unsubscribe {
                unawaited.removeShrinking(request.ref)
            } else if waited.removeShrinking(request.ref) != nil {
                actions.append(.answer(ref: request.ref, nil))
            } else {
                notWritten.insert(request.ref)
            }
        }
        return actions
    }

    /// A caller waits for the answer to `ref`, which it queued on connection `generation`.
    package mutating func wait(for ref: Int64, queuedOn connection: Int, linkUp: Bool) -> Wait {
        if let early = earlyAnswers.removeValueShrinking(forKey: ref) { return .answered(early) }
        if notWritten.removeShrinking(ref) != nil || !linkUp || connection != generation { return .noAnswer }
        waited.insert(ref)
        return .pending
    }

    /// A message from the cloud: an answer, an event, or the end of a subscription. Updates how far `topics`
    /// heard each topic.
    package mutating func received(_ message: RealtimeServerMessage, topics: inout RealtimeConnectionStateMachine) -> [Action] {
        var actions: [Action] = []
        switch message.op {
        case .ack:
            guard let ref = message.ref else { return [] }
            if let topic = resuming.removeValueShrinking(forKey: ref), message.resync != true, let replayed = message.replayed {
                // The replay follows this ack; the topic is caught up after it (at once when empty).
                if replayed == 0 { actions.append(.emit(.caughtUp(topic))) } else { replayRemaining[topic] = replayed }
            }
            answered(ref, message, into: &actions)
        case .error:
            if let ref = message.ref {
                resuming.removeValueShrinking(forKey: ref)
                answered(ref, message, into: &actions)
            } else if let topic = message.topic {
                // The cloud ended a subscription it no longer allows (a stream ACL changed). Whoever subscribes
                // again starts afresh: nothing sent meanwhile is replayed.
                topics.subscriptionEnded(topic)
                topics.forgetHeard(topic)
                forgetProgress(of: topic)
                actions.append(.emit(.subscriptionRefused(topic, code: message.code, message: message.message ?? "subscription ended")))
            }
        case .event:
            guard let seq = message.seq, let topic = message.topic else { return [] }
            topics.heardEvent(seq, of: topic)
            if let entity = message.entity {
                actions.append(.emit(.entityChanged(seq: seq, topic: topic, entity: entity, previous: message.previous)))
            } else if let streamMessage = message.streamMessage {
                actions.append(.emit(.streamMessage(seq: seq, topic: topic, message: streamMessage)))
            }
            if let remaining = replayRemaining[topic] {
                if remaining <= 1 {
                    replayRemaining.removeValueShrinking(forKey: topic)
                    actions.append(.emit(.caughtUp(topic)))
                } else {
                    replayRemaining[topic] = remaining - 1
                }
            }
        }
        return actions
    }

    private mutating func answered(_ ref: Int64, _ answer: RealtimeServerMessage, into actions: inout [Action]) {
        if ref == awaitedRef {
            // The batch is answered: the requests queued meanwhile go out as the next.
            awaitedRef = nil
            if !outgoing.isEmpty { actions.append(.writeNext) }
        }
        if waited.removeShrinking(ref) != nil {
            actions.append(.answer(ref: ref, answer))
        } else if unawaited.removeShrinking(ref) != nil {
            return
        } else if ref <= lastRef {
            earlyAnswers[ref] = answer
        }
    }

    /// A topic no longer wanted (its linger ended): a replay of it, under way or still to be acked, is not
    /// counted to its end.
    package mutating func dropped(_ topic: Topic) {
        forgetProgress(of: topic)
    }

    /// Forgets the replay of `topic` under way, and a resumption of it still awaiting its ack: an ack that comes
    /// after the topic was dropped starts no replay count.
    private mutating func forgetProgress(of topic: Topic) {
        replayRemaining.removeValueShrinking(forKey: topic)
        for (ref, resumed) in resuming where resumed == topic { resuming.removeValueShrinking(forKey: ref) }
    }

    /// The connection ended: nothing written on it will be answered, and nothing queued goes out on the next
    /// (its subscriptions are made again from the topics wanted).
    package mutating func connectionLost() -> [Action] {
        generation += 1
        lostThrough = lastRef
        awaitedRef = nil
        outgoing.removeAll()
        unawaited.removeAll()
        notWritten.removeAll()
        earlyAnswers.removeAll()
        resuming.removeAll()
        replayRemaining.removeAll()
        let lost = waited.sorted()
        waited.removeAll()
        return lost.map { .answer(ref: $0, nil) }
    }
}
