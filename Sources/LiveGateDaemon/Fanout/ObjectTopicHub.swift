// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore
import Synchronization

/// Maps connection tokens onto shared SDK observations: N tokens observing one object are one
/// ``ObjectTopic`` and one SDK observation (so one fetch and one realtime subscription).
final class ObjectTopicHub: Sendable {
    /// What a connection keeps for one of its tokens.
    struct Subscription: Sendable {
        let topic: ObjectTopic
        let subscriberID: Int
        let share: ObjectTopicShare
    }

    private let engine: LiveClient
    private let topics = Mutex<[EntityKey: ObjectTopic]>([:])
    /// New topics whose engine observation is yet to start, and whether a task is starting them.
    private let pendingStarts = Mutex<(topics: [ObjectTopic], running: Bool)>(([], false))
    private let logger: Logger

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    /// Subscribes `token` of a connection to `key`; `answer`, when given, is queued on the connection's loop
    /// right before the token's join (see ``ObjectTopic/add(_:answer:)``).
    func subscribe(
        key: EntityKey,
        options: ObserveOptions,
        sinceVersion: Int64? = nil,
        fields: Set<String>? = nil,
        outbox: ConnectionOutbox,
        eventLoop: any EventLoop,
        token: Int64,
        prefix: ByteBuffer,
        answer: LoopAnswer? = nil,
        onFinished: @escaping @Sendable () -> Void
    ) async -> Subscription {
        var tokenOptions = options
        tokenOptions.fields = fields
        let subscriber = ObjectTopic.Subscriber(
            outbox: outbox,
            eventLoop: eventLoop,
            token: token,
            prefix: prefix,
            options: tokenOptions,
            sinceVersion: sinceVersion,
            onFinished: onFinished
        )
        while true {
            let (topic, isNew) = topics.withLock { topics -> (ObjectTopic, Bool) in
                if let existing = topics[key] { return (existing, false) }
                let topic = ObjectTopic(key: key, logger: logger)
                topics[key] = topic
                return (topic, true)
            }
            guard let (id, share) = topic.add(subscriber, answer: answer) else {
                // The topic closed between lookup and add: forget it and start over.
                topics.withLock { if $0[key] === topic { $0[key] = nil } }
                continue
            }
            if isNew {
                startObserving(topic)
            } else if options.policy == .freshOnly, topic.awaitsItsRead {
                // Not held with a burst's cached copies: a `freshOnly` token waits for the read. A topic not yet
                // handed to the engine is marked (``ObjectTopic/wantsFreshAtOnce``), read when it is: the engine's
                // loop runs these in order, so one handed over already has its observation by then.
                let engine = self.engine
                Task(executorPreference: engine.taskExecutor) { await engine.activateAtOnce([key]) }
            }
            return Subscription(topic: topic, subscriberID: id, share: share)
        }
    }

    /// Starts the engine's observation of a new topic. Not awaited: the observation starts (its cache reads,
    /// then a read and a subscription batched with others) while the connection goes on to its next request, so
    /// a client's pipelined observations of many objects are not served one after another. The token's first
    /// notification comes when the engine emits it (its answer was queued first).
    ///
    /// The topics made while a start runs wait for it, and it hands them to the engine in calls of up to
    /// ``LiveClient/startBatchLimit`` (``LiveClient/observe(_:)``), on the engine's loop: a task apiece cost two
    /// thread hand-offs per new object (there and back), and a wait and a wake-up in the engine.
    private func startObserving(_ topic: ObjectTopic) {
        let first = pendingStarts.withLock { pending in
            pending.topics.append(topic)
            defer { pending.running = true }
            return !pending.running
        }
        guard first else { return }
        Task(executorPreference: engine.taskExecutor) { await self.startPending() }
    }

    private func startPending() async {
        let engine = self.engine
        while true {
            let topics = pendingStarts.withLock { pending in
                defer { pending.topics.removeAll() }
                if pending.topics.isEmpty { pending.running = false }
                return pending.topics
            }
            guard !topics.isEmpty else { return }
            // A task a batch: each waits for its read in the engine, where they queue up back to back (one
            // batch awaited after another would leave the engine's reads idle while each is told and activated).
            for start in stride(from: 0, to: topics.count, by: LiveClient.startBatchLimit) {
                let batch = topics[start..<min(start + LiveClient.startBatchLimit, topics.count)]
                Task(executorPreference: engine.taskExecutor) {
                    let sdkTokens = await engine.observe(
                        batch.map { topic in
                            ObservationRequest(key: topic.key, activatesAtOnce: topic.wantsFreshAtOnce) { change in topic.emit(change) }
                        }
                    )
                    for (topic, sdkToken) in zip(batch, sdkTokens) { topic.attach(sdkToken) }
                }
            }
            await Task.yield()  // the loop's other work (answers, fetches) between batches
        }
    }

    /// Ends a token's subscription; the last token of a topic releases its SDK observation.
    func unsubscribe(_ subscription: Subscription) {
        guard subscription.topic.remove(subscription.subscriberID, from: subscription.share) else { return }
        topics.withLock { topics in
            if topics[subscription.topic.key] === subscription.topic { topics[subscription.topic.key] = nil }
        }
    }

    /// How many objects are observed, and by how many tokens in all.
    var counts: (topics: Int, tokens: Int) {
        let all = topics.withLock { Array($0.values) }
        return (all.count, all.reduce(0) { $0 + $1.subscriberCount })
    }
}
