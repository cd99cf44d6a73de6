// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON

/// What a stream listener (or follower) hears (Kinvey's `onNext`, `onError`; `onStatus` is
/// ``LiveClient/addConnectionObserver(_:)``).
public enum LiveStreamEvent: Sendable, Equatable {
    /// A message sent to the user listened to, with the cloud's event sequence number (strictly increasing).
    case message(StreamMessage, seq: Int64)
    /// The realtime connection was down longer than the cloud's event log reaches back: messages sent
    /// meanwhile may be lost. Said explicitly, never silently.
    case resync
    /// The cloud refused the subscription when it was made again on reconnect (the ACL changed, or the
    /// stream was removed). The token stays valid; nothing more arrives until access is granted again and
    /// the connection is remade.
    case error(LiveError)
}

extension LiveClient {
    /// A handle on a Live Service stream. Cheap; listening is what costs.
    public nonisolated func stream(_ name: String) -> LiveStream {
        LiveStream(client: self, name: name)
    }

    // MARK: Listening

    /// Listens to `stream:<stream>/<user>`: one realtime subscription per topic, shared by every listener.
    func listen(_ topic: Topic, handler: @escaping @Sendable (LiveStreamEvent) -> Void) async throws(LiveError) -> NotificationToken {
        subscribers.streams.nextID += 1
        let id = subscribers.streams.nextID
        subscribers.streams.listeners[topic, default: [:]][id] = StreamListener(handler: handler)
        if let refusal = await realtime.acquire(topic) {
            removeStreamListener(topic, id)
            throw LiveError(subscriptionRefusal: refusal.code, message: refusal.message ?? "refused", topic: topic)
        }
        return NotificationToken { [weak self] in
            Task { await self?.stopListening(topic, id) }
        }
    }

    private func stopListening(_ topic: Topic, _ id: Int) async {
        guard subscribers.streams.listeners[topic]?[id] != nil else { return }
        removeStreamListener(topic, id)
        await realtime.release(topic)
    }

    private func removeStreamListener(_ topic: Topic, _ id: Int) {
        subscribers.streams.listeners[topic]?[id] = nil
        if subscribers.streams.listeners[topic]?.isEmpty == true { subscribers.streams.listeners[topic] = nil }
    }

    /// Hands a realtime stream event to every listener of its topic, one after another: listeners of one
    /// message are called in a row (the daemon encodes each message once because of it).
    func streamEvent(_ topic: Topic, _ event: LiveStreamEvent) {
        guard let listeners = subscribers.streams.listeners[topic] else { return }
        for listener in listeners.values { listener.handler(event) }
    }

    // MARK: Requests

    func sendStreamMessage(_ message: JSONValue, stream: String, to user: String) async throws(LiveError) -> SentStreamMessage {
        try Self.checkNames(stream, user)
        return try await withSession { token throws(LiveError) in try await cloud.sendStreamMessage(message, stream: stream, to: user, token: token) }
    }

    func streamAccess(stream: String, user: String) async throws(LiveError) -> StreamACL {
        try Self.checkNames(stream, user)
        return try await withSession { token throws(LiveError) in try await cloud.streamACL(stream: stream, user: user, token: token) }
    }

    func grantStreamAccess(_ acl: StreamACL, stream: String, user: String) async throws(LiveError) -> StreamACL {
        try Self.checkNames(stream, user)
        if let invalid = acl.invalidName {
            throw LiveError(code: .invalidArgument, message: "\"\(invalid)\" is not a user name: 1-128 characters of A-Z a-z 0-9 _ - .")
        }
        return try await withSession { token throws(LiveError) in try await cloud.setStreamACL(acl, stream: stream, user: user, token: token) }
    }

    static func checkNames(_ stream: String, _ user: String) throws(LiveError) {
        guard EntityKey.isValidName(stream), EntityKey.isValidName(user) else {
            throw LiveError(
                code: .invalidArgument,
                message: "stream and user names must be 1-128 characters of A-Z a-z 0-9 _ - . (got \"\(stream)\", \"\(user)\")"
            )
        }
    }
}

/// One listener of a stream topic.
struct StreamListener: Sendable {
    let handler: @Sendable (LiveStreamEvent) -> Void
}

/// A Live Service stream (Kinvey's `LiveStream`): directed messages (``send(to:_:)`` / ``listen(_:)``) and
/// feeds (``post(_:)`` / ``follow(_:_:)``), under per-user ACLs (``grantAccess(to:_:)``, ``access(of:)``).
/// The session's user is the sender and the listener.
public struct LiveStream: Sendable {
    let client: LiveClient
    public let name: String

    /// Sends `message` to `user`; the session's user must be among the user's publishers.
    /// - Throws: ``LiveError`` `notPermitted` (not a publisher), `notFound` (no such stream),
    ///   `messageTooLarge` (over the cloud's limit: not delivered).
    @discardableResult
    public func send(to user: String, _ message: JSONValue) async throws(LiveError) -> SentStreamMessage {
        try await client.sendStreamMessage(message, stream: name, to: user)
    }

    /// Posts `message` to everyone following the session's user (sends it to oneself).
    @discardableResult
    public func post(_ message: JSONValue) async throws(LiveError) -> SentStreamMessage {
        try await client.sendStreamMessage(message, stream: name, to: client.session.username)
    }

    /// Receives every message sent to the session's user, until the token is invalidated or released.
    /// - Throws: ``LiveError`` `notPermitted` when the user's ACL does not list the user among its subscribers.
    public func listen(_ handler: @escaping @Sendable (LiveStreamEvent) -> Void) async throws(LiveError) -> NotificationToken {
        try await client.listen(.stream(name, user: client.session.username), handler: handler)
    }

    /// Receives every message `user` posts, until the token is invalidated or released (Kinvey's unfollow).
    /// - Throws: ``LiveError`` `notPermitted` when `user`'s ACL does not list the session's user among its subscribers.
    public func follow(_ user: String, _ handler: @escaping @Sendable (LiveStreamEvent) -> Void) async throws(LiveError)
        -> NotificationToken
    {
        try LiveClient.checkNames(name, user)
        return try await client.listen(.stream(name, user: user), handler: handler)
    }

    /// Replaces `user`'s ACL on this stream (the session's user may change its own; an administrator anyone's).
    @discardableResult
    public func grantAccess(to user: String, _ acl: StreamACL) async throws(LiveError) -> StreamACL {
        try await client.grantStreamAccess(acl, stream: name, user: user)
    }

    /// `user`'s ACL on this stream (empty when none was granted).
    public func access(of user: String) async throws(LiveError) -> StreamACL {
        try await client.streamAccess(stream: name, user: user)
    }
}

extension LiveError {
    init(subscriptionRefusal code: CloudErrorCode?, message: String, topic: Topic) {
        switch code {
        case .forbidden?: self.init(code: .notPermitted, message: message)
        case .notFound?: self.init(code: .notFound, message: message)
        default: self.init(code: .cloudUnavailable, message: "the cloud refused to subscribe \(topic): \(message)")
        }
    }
}
