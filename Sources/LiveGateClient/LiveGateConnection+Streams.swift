// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON

/// Live Service streams through the daemon: its cloud user sends, posts, listens and follows.
///
/// ```swift
/// let listening = try await daemon.listen(stream: "songs")
/// try await daemon.send(stream: "songs", to: "paul", message: ["title": "Blackbird"])
/// for try await case .message(let message) in listening.events { print(message.from, message.message) }
/// ```
extension LiveGateConnection {
    /// Sends `message` to `user` on the stream.
    /// - Throws: ``LiveGateError`` `notPermitted` (the daemon's user is not among `user`'s publishers),
    ///   `notFound` (no such stream), `limitExceeded` (over the cloud's message size limit: not delivered).
    @discardableResult
    public func send(stream: String, to user: String, message: JSONValue) async throws -> StreamSendResult {
        try await request(Method.streamSend, StreamSendParams(stream: stream, to: user, message: message), as: StreamSendResult.self)
    }

    /// Posts `message` to everyone following the daemon's user.
    @discardableResult
    public func post(stream: String, message: JSONValue) async throws -> StreamSendResult {
        try await request(Method.streamPost, StreamPostParams(stream: stream, message: message), as: StreamSendResult.self)
    }

    /// Listens to the messages sent to the daemon's user, until the token is invalidated.
    public func listen(stream: String) async throws -> StreamListening {
        let slot = ResponseSlot<StreamListening>()
        try await send(Method.streamListen, StreamListenParams(stream: stream), .listen(slot))
        return try await slot.value()
    }

    /// Follows what `user` posts, until the token is invalidated (that is how to unfollow).
    public func follow(stream: String, user: String) async throws -> StreamListening {
        let slot = ResponseSlot<StreamListening>()
        try await send(Method.streamFollow, StreamListenParams(stream: stream, user: user), .listen(slot))
        return try await slot.value()
    }

    /// Replaces `user`'s access to the stream (the daemon's user may change its own; a cloud administrator anyone's).
    @discardableResult
    public func grantAccess(stream: String, user: String, acl: StreamAccess) async throws -> StreamAccess {
        try await request(Method.streamGrantAccess, StreamAccessParams(stream: stream, user: user, acl: acl), as: StreamAccess.self)
    }

    /// `user`'s access to the stream.
    public func access(stream: String, user: String) async throws -> StreamAccess {
        try await request(Method.streamAccess, StreamAccessParams(stream: stream, user: user), as: StreamAccess.self)
    }
}

/// A stream token and what it hears, until it is invalidated or the connection ends.
public struct StreamListening: Sendable {
    public let token: Int64
    public let events: AsyncThrowingStream<StreamEvent, any Error>
}

/// What a stream token hears.
public enum StreamEvent: Sendable {
    /// One message, with the cloud's sequence number (strictly increasing on one token).
    case message(StreamMessageBody)
    /// The daemon's link to the cloud was down longer than the cloud's log reaches back: messages may be lost.
    case resync
    /// The cloud ended the subscription (access revoked), or refused it when the daemon remade it (access revoked, stream removed).
    case error(LiveGateError)
}
