// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps feed tokens (`feed.subscribe`) onto SDK feed subscriptions, one to one. The SDK shares one realtime
/// subscription per collection and delivers each event to all of its subscribers in a row under one
/// emission number, so each event is encoded once, and its tokens' shares (``TokenFanout``) write the same bytes
/// for every token. Events are never coalesced: a client too slow for them is cut off by its outbox.
final class FeedFanout: Sendable {
    private let engine: LiveClient
    /// Event bodies, by emission.
    private let encoded: EncodedOnce<Int, ByteBuffer>
    private let shares = TokenShares()

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        encoded = EncodedOnce(logger: logger)
    }

    /// How many event bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encoded.count }

    /// Subscribes a connection's token to the collection's changes; nothing is written for it before
    /// ``NewsSubscription/open(answer:)``.
    /// - Throws: ``LiveError`` when the cloud refuses.
    func subscribe(collection: String, outbox: ConnectionOutbox, eventLoop: any EventLoop, token: Int64) async throws(LiveError)
        -> NewsSubscription
    {
        let prefix = NotificationFrame.prefix(method: NotificationMethod.feedEvent, token: token)
        let member = TokenFanout.Member(outbox: outbox, token: token, prefixes: [prefix], coalesces: false, held: true)
        let membership = shares.join(member, on: eventLoop)
        do {
            let sdkToken = try await engine.subscribeFeed(collection: collection) { [self] delivery in
                guard let body = encoded.encoded(delivery.emission, { try NotificationFrame.body(Self.wireEvent(delivery.event)) }) else {
                    return
                }
                membership.share.submit(.deliver(TokenFanout.Change(emission: delivery.emission), body, to: [membership.id]))
            }
            return NewsSubscription(sdkToken: sdkToken, membership: membership)
        } catch {
            membership.leave()
            throw error
        }
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
