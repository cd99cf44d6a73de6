// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore
import Synchronization

/// Maps feed tokens (`feed.subscribe`) onto SDK feed subscriptions, one to one. The SDK shares one realtime
/// subscription per collection and delivers each event to all of its subscribers in a row under one
/// emission number, so each event is encoded once and the same bytes go to every token. Events are never
/// coalesced: a client too slow for them is cut off by its outbox.
final class FeedFanout: Sendable {
    private struct Encoded {
        let emission: Int
        let body: ByteBuffer
    }

    private let engine: LiveClient
    private let logger: Logger
    private let last = Mutex<Encoded?>(nil)
    private let encodings = Atomic<Int>(0)

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    /// How many event bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encodings.load(ordering: .relaxed) }

    /// Subscribes a connection's token to the collection's changes; nothing is written for it before
    /// ``FeedSubscription/open()``.
    /// - Throws: ``LiveError`` when the cloud refuses.
    func subscribe(collection: String, outbox: ConnectionOutbox, token: Int64) async throws(LiveError) -> FeedSubscription {
        let gate = NotificationGate(outbox: outbox, token: token)
        let prefix = NotificationFrame.prefix(method: NotificationMethod.feedEvent, token: token)
        let sdkToken = try await engine.subscribeFeed(collection: collection) { [self] delivery in
            if let body = body(delivery) { gate.pass(prefix, body) }
        }
        return FeedSubscription(sdkToken: sdkToken, gate: gate)
    }

    private func body(_ delivery: LiveFeedDelivery) -> ByteBuffer? {
        if let cached = last.withLock({ $0?.emission == delivery.emission ? $0?.body : nil }) { return cached }
        let event: FeedEventBody
        switch delivery.event {
        case .ready: event = FeedEventBody(event: .ready)
        case .next(let entity, let seq):
            event = FeedEventBody(event: .next, seq: seq, snapshot: ObjectSnapshot(entity), deleted: entity.deleted ? true : nil)
        case .status(let status): event = FeedEventBody(event: .status, status: status.rawValue)
        case .resync: event = FeedEventBody(event: .resync)
        case .error(let error): event = FeedEventBody(event: .error, error: RPCError(error))
        }
        do {
            let body = try NotificationFrame.body(event)
            encodings.add(1, ordering: .relaxed)
            last.withLock { $0 = Encoded(emission: delivery.emission, body: body) }
            return body
        } catch {
            logger.error("could not encode a feed event", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

/// A connection token's feed subscription.
struct FeedSubscription: Sendable {
    let sdkToken: NotificationToken
    let gate: NotificationGate

    /// Lets the token's events through (those that arrived before are written first, in order).
    func open() { gate.open() }
}
