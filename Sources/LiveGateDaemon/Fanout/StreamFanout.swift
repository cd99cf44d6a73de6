// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps stream tokens (`stream.listen`, `stream.follow`) onto SDK stream listeners, one to one. The SDK
/// shares one realtime subscription per stream topic and calls all listeners of one message in a row, so
/// each message is encoded once (keyed by its sequence number), and its tokens' shares (``TokenFanout``) write
/// the same bytes for every token. Messages are never coalesced: a client too slow for them is cut off by its
/// outbox.
final class StreamFanout: Sendable {
    private let engine: LiveClient
    /// Message bodies, by sequence number.
    private let encoded: EncodedOnce<Int64, ByteBuffer>
    private let shares = TokenShares()

    /// The member's prefixes: a message's, then a notice's.
    private static let message = 0
    private static let notice = 1

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        encoded = EncodedOnce(logger: logger)
    }

    /// How many message bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encoded.count }

    /// Listens for a connection's token: to the daemon user's own messages (`user` nil) or to what `user`
    /// posts. Nothing is written for the token before ``NewsSubscription/open(answer:)``, so the client learns
    /// the token (the answer, queued by the caller in between) before its first message.
    /// - Throws: ``LiveError`` when the cloud refuses (not a subscriber, no such stream).
    func subscribe(stream: String, user: String?, outbox: ConnectionOutbox, eventLoop: any EventLoop, token: Int64) async throws(LiveError)
        -> NewsSubscription
    {
        let prefixes = [
            NotificationFrame.prefix(method: NotificationMethod.streamMessage, token: token),
            NotificationFrame.prefix(method: NotificationMethod.streamNotice, token: token),
        ]
        let member = TokenFanout.Member(outbox: outbox, token: token, prefixes: prefixes, coalesces: false, held: true)
        let membership = shares.join(member, on: eventLoop)
        let handler: @Sendable (LiveStreamEvent) -> Void = { [self] event in
            switch event {
            case .message(let message, let seq):
                guard let body = body(message, seq: seq) else { return }
                membership.share.submit(.deliver(TokenFanout.Change(emission: Int(seq), method: Self.message), body, to: [membership.id]))
            case .resync:
                guard let body = try? NotificationFrame.body(StreamNoticeBody(resync: true)) else { return }
                membership.share.submit(.deliver(TokenFanout.Change(emission: nil, method: Self.notice), body, to: [membership.id]))
            case .error(let error):
                guard let body = try? NotificationFrame.body(StreamNoticeBody(error: RPCError(error))) else { return }
                membership.share.submit(.deliver(TokenFanout.Change(emission: nil, method: Self.notice), body, to: [membership.id]))
            }
        }
        let live = engine.stream(stream)
        do {
            let sdkToken = if let user { try await live.follow(user, handler) } else { try await live.listen(handler) }
            return NewsSubscription(sdkToken: sdkToken, membership: membership)
        } catch {
            membership.leave()
            throw error
        }
    }

    private func body(_ message: StreamMessage, seq: Int64) -> ByteBuffer? {
        encoded.encoded(seq) {
            try NotificationFrame.body(
                StreamMessageBody(seq: seq, stream: message.stream, from: message.from, to: message.to, at: message.at, message: message.message)
            )
        }
    }
}

extension StreamSendResult {
    init(_ sent: SentStreamMessage) {
        self.init(seq: sent.seq, from: sent.message.from, to: sent.message.to, at: sent.message.at)
    }
}
