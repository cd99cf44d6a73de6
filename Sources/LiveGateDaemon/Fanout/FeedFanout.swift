// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps feed tokens (`feed.subscribe`) onto SDK feed subscriptions, one to one. The SDK shares one realtime
/// subscription per collection and delivers each event to all of its subscribers in a row under one
/// emission number, so each event is encoded once and the same bytes go to every token. Events are never
/// coalesced: a client too slow for them is cut off by its outbox.
final class FeedFanout: Sendable {
    private let engine: LiveClient
    /// Event bodies, by emission.
    private let encoded: EncodedOnce<Int>

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        encoded = EncodedOnce(logger: logger)
    }

    /// How many event bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encoded.count }

    /// Subscribes a connection's token to the collection's changes; nothing is written for it before
    /// ``GatedSubscription/open()``.
    /// - Throws: ``LiveError`` when the cloud refuses.
    func subscribe(collection: String, outbox: ConnectionOutbox, token: Int64) async throws(LiveError) -> GatedSubscription {
        let gate = NotificationGate(outbox: outbox, token: token)
        let prefix = NotificationFrame.prefix(method: NotificationMethod.feedEvent, token: token)
        let sdkToken = try await engine.subscribeFeed(collection: collection) { [self] delivery in
            if let body = body(delivery) { gate.pass(prefix, body) }
        }
        return GatedSubscription(sdkToken: sdkToken, gate: gate)
    }

    private func body(_ delivery: LiveFeedDelivery) -> ByteBuffer? {
        encoded.body(delivery.emission) { try NotificationFrame.body(Self.wireEvent(delivery.event)) }
    }

    private static func wireEvent(_ event: LiveFeedEvent) -> FeedEventBody {
        switch event {
        case .ready: FeedEventBody(event: .ready)
        case .next(let entity, let seq):
            FeedEventBody(event: .next, seq: seq, snapshot: ObjectSnapshot(entity), deleted: entity.deleted ? true : nil)
        case .status(let status): FeedEventBody(event: .status, status: status.rawValue)
        case .resync: FeedEventBody(event: .resync)
        case .error(let error): FeedEventBody(event: .error, error: RPCError(error))
        }
    }
}
