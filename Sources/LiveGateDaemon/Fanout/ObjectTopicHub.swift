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
    }

    private let engine: LiveClient
    private let topics = Mutex<[EntityKey: ObjectTopic]>([:])
    private let logger: Logger

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    /// Subscribes `token` of a connection to `key`.
    func subscribe(
        key: EntityKey,
        options: ObserveOptions,
        sinceVersion: Int64? = nil,
        fields: Set<String>? = nil,
        outbox: ConnectionOutbox,
        eventLoop: any EventLoop,
        token: Int64,
        onFinished: @escaping @Sendable () -> Void
    ) async -> Subscription {
        var tokenOptions = options
        tokenOptions.fields = fields
        let subscriber = ObjectTopic.Subscriber(
            outbox: outbox,
            eventLoop: eventLoop,
            token: token,
            prefix: NotificationFrame.prefix(method: NotificationMethod.objectChanged, token: token),
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
            guard let id = topic.add(subscriber) else {
                // The topic closed between lookup and add: forget it and start over.
                topics.withLock { if $0[key] === topic { $0[key] = nil } }
                continue
            }
            if isNew {
                // Not awaited: the engine's observation starts (its cache reads, then a fetch and a
                // subscription batched with others) while the connection goes on to its next request, so a
                // client's pipelined observations of many objects are not served one after another. The
                // token's first notification comes when the engine emits it (its answer was queued first).
                let engine = self.engine
                Task {
                    let sdkToken = await engine.object(collection: key.collection, id: key.id).observe { change in
                        topic.emit(change)
                    }
                    topic.attach(sdkToken)
                }
            }
            return Subscription(topic: topic, subscriberID: id)
        }
    }

    /// Ends a token's subscription; the last token of a topic releases its SDK observation.
    func unsubscribe(_ subscription: Subscription) {
        guard subscription.topic.remove(subscription.subscriberID) else { return }
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
