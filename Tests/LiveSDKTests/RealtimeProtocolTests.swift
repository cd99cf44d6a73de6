// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// The realtime protocol without a socket: requests in batches, answers to whoever waits, resumptions and their
/// replays, and what each fault the live checker injects (a dropped connection, a refused one, a write that
/// fails) does to them.
@Suite struct RealtimeProtocolTests {
    let a = Topic.object(EntityKey(collection: "notes", id: "a"))
    let b = Topic.object(EntityKey(collection: "notes", id: "b"))
    let c = Topic.collection("notes")

    static func event(_ seq: Int64, on topic: Topic, id: String = "a") -> RealtimeServerMessage {
        let entity = Entity(
            collection: "notes",
            id: id,
            version: seq,
            data: ["n": .number(JSONNumber(Int(seq)))],
            createdAt: "t",
            updatedAt: "t",
            deleted: false
        )
        return RealtimeServerMessage(op: .event, seq: seq, topic: topic, entity: entity)
    }

    static func connected() -> RealtimeConnectionStateMachine {
        var topics = RealtimeConnectionStateMachine()
        topics.connectionStarted()
        _ = topics.connectionEstablished()
        return topics
    }

    @Test func aBatchGoesAtOnceAndTheNextOnceItsLastRequestIsAnswered() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let first = wire.queue(.subscribe, a)
        #expect(wire.nextBatch()?.map(\.ref) == [first])
        let second = wire.queue(.subscribe, b)
        let third = wire.queue(.subscribe, c)
        #expect(wire.nextBatch() == nil, "one batch in flight at a time")
        #expect(wire.wait(for: first, queuedOn: 0, linkUp: true) == .pending)
        #expect(wire.received(.ack(ref: first, seq: 1), topics: &topics) == [.writeNext, .answer(ref: first, .ack(ref: first, seq: 1))])
        #expect(wire.nextBatch()?.map(\.ref) == [second, third], "what was queued meanwhile goes as one batch")
        #expect(wire.nextBatch() == nil)
    }

    @Test func aBatchHoldsAtMostWhatTheCloudTakesInOneMessage() {
        var wire = RealtimeProtocol()
        for index in 0..<(RealtimeClientBatch.maximumRequests + 5) {
            _ = wire.queue(.subscribe, .object(EntityKey(collection: "notes", id: "o\(index)")))
        }
        #expect(wire.nextBatch()?.count == RealtimeClientBatch.maximumRequests)
        #expect(wire.hasOutgoing)
    }

    @Test func anAnswerThatComesBeforeItsCallerWaitsIsKeptForIt() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let ref = wire.queue(.subscribe, a)
        _ = wire.nextBatch()
        #expect(wire.received(.ack(ref: ref, seq: 4), topics: &topics) == [])
        #expect(wire.wait(for: ref, queuedOn: 0, linkUp: true) == .answered(.ack(ref: ref, seq: 4)))
    }

    @Test func nobodyWaitsForAnUnsubscription() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let ref = wire.queue(.unsubscribe, a)
        _ = wire.nextBatch()
        #expect(wire.received(.ack(ref: ref), topics: &topics) == [], "its answer is dropped")
        let another = wire.queue(.unsubscribe, b)
        #expect(wire.notWritten(wire.nextBatch() ?? []) == [], "and no answer is owed when it is not written")
        #expect(another > ref)
    }

    @Test func aResumedTopicIsCaughtUpAfterItsReplay() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        _ = topics.acquire(a)
        let ref = wire.queue(.subscribe, a, since: 10)
        _ = wire.nextBatch()
        #expect(wire.wait(for: ref, queuedOn: 0, linkUp: true) == .pending)
        let ack = RealtimeServerMessage.ack(ref: ref, seq: 12, replayed: 2)
        #expect(wire.received(ack, topics: &topics) == [.answer(ref: ref, ack)])
        let eleven = wire.received(Self.event(11, on: a), topics: &topics)
        #expect(eleven.count == 1, "a replayed event, not yet the end")
        let twelve = wire.received(Self.event(12, on: a), topics: &topics)
        #expect(twelve.last == .emit(.caughtUp(a)))
        #expect(topics.heard(a)?.seq == 12)
        #expect(wire.received(Self.event(13, on: a), topics: &topics).count == 1, "no second catch-up")
    }

    @Test func anEmptyReplayIsCaughtUpAtOnceAndAResyncNever() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let empty = wire.queue(.subscribe, a, since: 10)
        let resync = wire.queue(.subscribe, b, since: 3)
        _ = wire.nextBatch()
        #expect(wire.received(.ack(ref: empty, seq: 10, replayed: 0), topics: &topics) == [.emit(.caughtUp(a))])
        #expect(wire.received(.ack(ref: resync, seq: 40, resync: true), topics: &topics) == [])
        #expect(wire.received(Self.event(41, on: b, id: "b"), topics: &topics).count == 1, "only the event")
    }

    /// The checker's `realtimeDrop` and `cloudKilled`: the connection ends mid-batch and mid-replay.
    @Test func aLostConnectionAnswersEveryWaiterWithNothingAndEndsItsReplays() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let resumed = wire.queue(.subscribe, a, since: 1)
        let waiting = wire.queue(.subscribe, b)
        _ = wire.nextBatch()
        #expect(wire.wait(for: resumed, queuedOn: 0, linkUp: true) == .pending)
        #expect(wire.wait(for: waiting, queuedOn: 0, linkUp: true) == .pending)
        _ = wire.received(.ack(ref: resumed, seq: 5, replayed: 3), topics: &topics)
        let queued = wire.queue(.subscribe, c)
        #expect(wire.connectionLost() == [.answer(ref: waiting, nil)])
        #expect(wire.generation == 1)
        #expect(wire.awaitedRef == nil && !wire.hasOutgoing, "nothing queued goes out on the next connection")
        #expect(wire.wait(for: queued, queuedOn: 0, linkUp: true) == .noAnswer, "queued on the connection that ended")
        // On the next connection the topic is subscribed afresh; an event of it is no replay of the old one.
        #expect(wire.received(Self.event(6, on: a), topics: &topics).count == 1)
        #expect(wire.received(Self.event(7, on: a), topics: &topics).count == 1)
        #expect(wire.received(Self.event(8, on: a), topics: &topics).count == 1, "no catch-up from the lost replay")
    }

    /// The checker's `cloudRefusesRealtime` and a write that fails: a batch not written answers nothing, and
    /// the next batch may go.
    @Test func aBatchNotWrittenAnswersItsWaitersWithNothing() {
        var wire = RealtimeProtocol()
        let early = wire.queue(.subscribe, a)
        let late = wire.queue(.subscribe, b, since: 2)
        _ = wire.queue(.unsubscribe, c)
        let batch = wire.nextBatch() ?? []
        #expect(wire.wait(for: early, queuedOn: 0, linkUp: true) == .pending)
        #expect(wire.notWritten(batch) == [.answer(ref: early, nil)])
        #expect(wire.wait(for: late, queuedOn: 0, linkUp: true) == .noAnswer, "its caller waits after the failure")
        #expect(wire.awaitedRef == nil)
        let next = wire.queue(.subscribe, a)
        #expect(wire.nextBatch()?.map(\.ref) == [next])
    }

    @Test func aWaitOnAConnectionThatIsDownHasNoAnswer() {
        var wire = RealtimeProtocol()
        let ref = wire.queue(.subscribe, a)
        _ = wire.nextBatch()
        #expect(wire.wait(for: ref, queuedOn: 0, linkUp: false) == .noAnswer)
    }

    /// A stream's ACL changed: the cloud ends the subscription. Its topic starts afresh, and a replay it was in
    /// is no longer counted.
    @Test func aSubscriptionTheCloudEndsIsRefusedAndForgotten() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let stream = Topic.stream("songs", user: "alice")
        _ = topics.acquire(stream)
        let ref = wire.queue(.subscribe, stream, since: 3)
        _ = wire.nextBatch()
        _ = wire.received(.ack(ref: ref, seq: 9, replayed: 4), topics: &topics)
        let ended = RealtimeServerMessage.error(ref: nil, code: .forbidden, message: "no longer a subscriber", topic: stream)
        #expect(wire.received(ended, topics: &topics) == [.emit(.subscriptionRefused(stream, code: .forbidden, message: "no longer a subscriber"))])
        #expect(topics.heard(stream) == .init(seq: nil, eventSeq: nil))
    }

    @Test func aRefusedRequestIsAnsweredWithTheRefusal() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let ref = wire.queue(.subscribe, a, since: 2)
        _ = wire.nextBatch()
        #expect(wire.wait(for: ref, queuedOn: 0, linkUp: true) == .pending)
        let refusal = RealtimeServerMessage.error(ref: ref, code: .forbidden, message: "no")
        #expect(wire.received(refusal, topics: &topics) == [.answer(ref: ref, refusal)])
        // A later ack with the same ref (it cannot come, but if it did) starts no replay.
        #expect(wire.received(.ack(ref: ref, seq: 3, replayed: 1), topics: &topics) == [])
    }

    /// A topic dropped (its linger ended) while its resuming subscription awaited its ack: the ack that comes
    /// after starts no replay, so a later subscription of the topic is not told caught up by an old count.
    @Test func aResumptionOfATopicDroppedMeanwhileStartsNoReplay() {
        var wire = RealtimeProtocol()
        var topics = Self.connected()
        let ref = wire.queue(.subscribe, a, since: 5)
        _ = wire.nextBatch()
        wire.dropped(a)
        #expect(wire.received(.ack(ref: ref, seq: 9, replayed: 2), topics: &topics) == [])
        #expect(wire.received(Self.event(10, on: a), topics: &topics).count == 1)
        #expect(wire.received(Self.event(11, on: a), topics: &topics).count == 1, "no catch-up from the old count")
    }

    /// A write that fails after the connection was lost: its requests were answered with the loss, and none is
    /// kept as not written.
    @Test func aBatchThatFailsAfterTheLossOwesNothing() {
        var wire = RealtimeProtocol()
        let ref = wire.queue(.subscribe, a)
        let batch = wire.nextBatch() ?? []
        #expect(wire.wait(for: ref, queuedOn: 0, linkUp: true) == .pending)
        #expect(wire.connectionLost() == [.answer(ref: ref, nil)])
        #expect(wire.notWritten(batch) == [], "answered once, with the loss")
        let next = wire.queue(.subscribe, a)
        #expect(wire.nextBatch()?.map(\.ref) == [next])
    }
}
