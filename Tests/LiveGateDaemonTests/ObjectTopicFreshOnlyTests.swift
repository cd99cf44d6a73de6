// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateDaemon
import LiveJSON
import LiveSDK
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// What a topic tells the hub about its `freshOnly` tokens: whether the engine reads it at once when the topic
/// is handed over, and whether a `freshOnly` token joining it still waits for its read.
@Suite struct ObjectTopicFreshOnlyTests {
    func subscriber(_ outbox: ConnectionOutbox, _ loop: any EventLoop, token: Int64, policy: ObservePolicy) -> ObjectTopic.Subscriber {
        ObjectTopic.Subscriber(
            outbox: outbox,
            eventLoop: loop,
            token: token,
            prefix: ByteBuffer(string: "t\(token):"),
            options: ObserveOptions(policy: policy),
            sinceVersion: nil,
            onFinished: {}
        )
    }

    func change(_ status: DataStatus, _ loading: LoadingStatus) -> LiveObjectChange {
        LiveObjectChange(
            snapshot: Entity(collection: "c", id: "o", version: 1, data: [:], createdAt: "c", updatedAt: "u"),
            dataStatus: status,
            loadingStatus: loading
        )
    }

    @Test func aFreshOnlyTokenMarksTheTopicAndWaitsUntilItsRead() {
        let loop = EmbeddedEventLoop()
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30), eventLoop: loop)
        let topic = ObjectTopic(key: EntityKey(collection: "c", id: "o"), logger: Logger(label: "test"))
        _ = topic.add(subscriber(outbox, loop, token: 1, policy: .localThenFresh))
        #expect(!topic.wantsFreshAtOnce)
        #expect(topic.awaitsItsRead, "nothing told yet")
        _ = topic.add(subscriber(outbox, loop, token: 2, policy: .freshOnly))
        #expect(topic.wantsFreshAtOnce)
        topic.emit(change(.local, .loading))
        #expect(topic.awaitsItsRead, "its cached copy only")
        topic.emit(change(.fresh, .loaded))
        #expect(!topic.awaitsItsRead)
        loop.run()
    }
}
