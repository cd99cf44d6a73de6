// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps stream tokens (`stream.listen`, `stream.follow`) onto SDK stream listeners, one to one. The SDK
/// shares one realtime subscription per stream topic and calls all listeners of one message in a row, so
/// each message is encoded once (keyed by its sequence number) and the same bytes go to every token.
/// Messages are never coalesced: a client too slow for them is cut off by its outbox.
final class StreamFanout: Sendable {
    private let engine: LiveClient
    /// Message bodies, by sequence number.
    private let encoded: EncodedOnce<Int64>

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        encoded = EncodedOnce(logger: logger)
    }

    /// How many message bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encoded.count }

    /// Listens for a connection's token: to the daemon user's own messages (`user` nil) or to what `user`
    /// posts. Nothing is written for the token before ``GatedSubscription/open()``, so the client learns
    /// the token (the answer, queued by the caller in between) before its first message.
    /// - Throws: ``LiveError`` when the cloud refuses (not a subscriber, no such stream).
    func subscribe(stream: String, user: String?, outbox: ConnectionOutbox, token: Int64) async throws(LiveError) -> GatedSubscription {
        let gate = NotificationGate(outbox: outbox, token: token)
        let messagePrefix = NotificationFrame.prefix(method: NotificationMethod.streamMessage, token: token)
        let noticePrefix = NotificationFrame.prefix(method: NotificationMethod.streamNotice, token: token)
        let handler: @Sendable (LiveStreamEvent) -> Void = { [self] event in
            switch event {
            case .message(let message, let seq):
                if let body = body(message, seq: seq) { gate.pass(messagePrefix, body) }
            case .resync:
                if let body = try? NotificationFrame.body(StreamNoticeBody(resync: true)) { gate.pass(noticePrefix, body) }
            case .error(let error):
                if let body = try? NotificationFrame.body(StreamNoticeBody(error: RPCError(error))) { gate.pass(noticePrefix, body) }
            }
        }
        let live = engine.stream(stream)
        let sdkToken: NotificationToken
        if let user {
            sdkToken = try await live.follow(user, handler)
        } else {
            sdkToken = try await live.listen(handler)
        }
        return GatedSubscription(sdkToken: sdkToken, gate: gate)
    }

    private func body(_ message: StreamMessage, seq: Int64) -> ByteBuffer? {
        encoded.body(seq) {
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
