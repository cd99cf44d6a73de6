// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// The realtime connection's requests: their refs, those waiting to be written, and the answers awaited.
struct RealtimeRequests {
    var nextRef: Int64 = 0
    /// Requests whose answer a caller of ``RealtimeConnection/sendAll(_:)`` waits for: its wait, and the
    /// request's place in it.
    var groupedAcks: [Int64: (group: AnswerGroup, index: Int)] = [:]
    var earlyAnswers: [Int64: RealtimeServerMessage] = [:]
    /// Requests waiting to be written (see ``RealtimeConnection/sendAll(_:)``), whether a write is under way, and
    /// the refs of requests whose write failed before their sender waited.
    var outgoing: [RealtimeClientMessage] = []
    var writing = false
    var unsent: Set<Int64> = []
    /// The last request of the batch written last, until the cloud answers it.
    var awaitedRef: Int64?
    /// Requests whose answer nobody waits for (every unsubscription: a linger ended), until it comes.
    var unawaited: Set<Int64> = []
    /// Counts connections lost: a request sent on an earlier connection gets no answer on a later one.
    var generation = 0
}

/// Subscriptions under way.
struct SubscriptionProgress {
    /// Resuming subscriptions whose ack has not arrived yet, by request ref.
    var resuming: [Int64: Topic] = [:]
    /// Topics whose first acquirer's subscription awaits the cloud's answer, with the later acquirers waiting
    /// for it: one told "subscribed" before the subscription took effect would fetch, and miss the events
    /// between its read and the subscription's baseline.
    var subscribing: [Topic: [CheckedContinuation<Void, Never>]] = [:]
    /// Replayed events still to come per resumed topic (from the ack's `replayed`).
    var replayRemaining: [Topic: Int] = [:]
}

/// The topics that stay subscribed for a moment after their last holder left, and whether the one task that ends
/// their lingers runs.
struct Lingering {
    var topics: TopicLingers<Topic>
    var running = false
}

/// One wait for the answers of several requests (``RealtimeConnection/sendAll(_:)``). Used on the realtime
/// connection's executor only.
final class AnswerGroup {
    var answers: [RealtimeServerMessage?]
    /// How many answers are still awaited.
    var awaited = 0
    var continuation: CheckedContinuation<[RealtimeServerMessage?], Never>?

    init(count: Int) { answers = Array(repeating: nil, count: count) }

    /// The answer at `index` came (`nil`: none will); the last awaited ends the wait.
    func answer(_ index: Int, _ message: RealtimeServerMessage?) {
        answers[index] = message
        awaited -= 1
        guard awaited == 0, let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: answers)
    }
}
