// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON

/// What a typed stream listener hears: a message decoded as `Message`, or a notice about the listening.
public enum LiveStreamEvent<Message: Sendable>: Sendable {
    /// One message. `message` is `nil` when it does not decode as `Message` (then `decodingError` says why);
    /// `body` is the message as the daemon sent it.
    case message(_ message: Message?, body: StreamMessageBody, decodingError: LiveGateError?)
    /// Messages may have been lost: the daemon's link to the cloud was down longer than the cloud's log
    /// reaches back, or (through a ``LiveGateClient``) the daemon was away and the listening was made again.
    case resync
    /// The cloud ended the subscription (access revoked) or refused it when the daemon remade it.
    case error(LiveGateError)

    init(_ event: StreamEvent, as type: Message.Type) where Message: Decodable {
        switch event {
        case .message(let body):
            do {
                self = .message(try body.message.decode(as: Message.self), body: body, decodingError: nil)
            } catch {
                self = .message(
                    nil,
                    body: body,
                    decodingError: LiveGateError(code: nil, message: "the message does not decode as \(Message.self): \(error)")
                )
            }
        case .resync: self = .resync
        case .error(let error): self = .error(error)
        }
    }
}

/// A Live Service stream of the daemon, typed (the Kinvey guide's `LiveStream<Message>`): its cloud user
/// sends to users, posts to its followers, listens to what is sent to it and follows others.
///
/// ```swift
/// struct Song: Codable, Sendable { var title: String }
/// let songs = daemon.stream("songs", of: Song.self)
/// let token = try await songs.listen { event in
///     if case .message(let song?, let body, _) = event { print(body.from, song.title) }
/// }
/// try await songs.send(Song(title: "Blackbird"), to: "paul")
/// ```
///
/// Made from a ``LiveGateClient``, its listeners outlive the daemon: after a restart the listening is made
/// again and the handler gets `.resync` first (what was sent while the daemon was away is not replayed).
public struct LiveStream<Message: Codable & Sendable>: Sendable {
    let source: ConnectionSource
    public let name: String

    /// Sends `message` to `user` (the daemon's user must be among `user`'s publishers).
    @discardableResult
    public func send(_ message: Message, to user: String) async throws -> StreamSendResult {
        try await source.current().send(stream: name, to: user, message: try JSONValue(encoding: message))
    }

    /// Posts `message` to everyone following the daemon's user.
    @discardableResult
    public func post(_ message: Message) async throws -> StreamSendResult {
        try await source.current().post(stream: name, message: try JSONValue(encoding: message))
    }

    /// Calls `handler` with what is sent to the daemon's user, one event after another, until the returned
    /// token is invalidated or released.
    public func listen(_ handler: @escaping @Sendable (LiveStreamEvent<Message>) -> Void) async throws -> NotificationToken {
        try await deliver({ try await $0.listen(stream: name) }) { event in handler(event) }
    }

    /// As ``listen(_:)``, calling `handler` on the main actor.
    public func listenOnMainActor(_ handler: @escaping @MainActor @Sendable (LiveStreamEvent<Message>) -> Void) async throws
        -> NotificationToken
    {
        try await deliver({ try await $0.listen(stream: name) }) { event in await handler(event) }
    }

    /// Calls `handler` with what `user` posts, until the returned token is invalidated or released (that is
    /// how to unfollow).
    public func follow(_ user: String, _ handler: @escaping @Sendable (LiveStreamEvent<Message>) -> Void) async throws -> NotificationToken {
        try await deliver({ try await $0.follow(stream: name, user: user) }) { event in handler(event) }
    }

    /// As ``follow(_:_:)``, calling `handler` on the main actor.
    public func followOnMainActor(_ user: String, _ handler: @escaping @MainActor @Sendable (LiveStreamEvent<Message>) -> Void)
        async throws -> NotificationToken
    {
        try await deliver({ try await $0.follow(stream: name, user: user) }) { event in await handler(event) }
    }

    /// Replaces `user`'s access to the stream.
    @discardableResult
    public func grantAccess(to user: String, _ acl: StreamAccess) async throws -> StreamAccess {
        try await source.current().grantAccess(stream: name, user: user, acl: acl)
    }

    /// `user`'s access to the stream.
    public func access(of user: String) async throws -> StreamAccess {
        try await source.current().access(stream: name, user: user)
    }

    private func deliver(
        _ listen: @escaping @Sendable (LiveGateConnection) async throws -> StreamListening,
        _ deliver: @escaping @Sendable (LiveStreamEvent<Message>) async -> Void
    ) async throws -> NotificationToken {
        let loop = ObservationLoop<StreamEvent>(source: source, once: false) { connection in
            let listening = try await listen(connection)
            return (listening.token, listening.events)
        }
        return try await loop.start(()) { _, event in
            await deliver(LiveStreamEvent(event, as: Message.self))
            return true
        } resumed: { _ in
            await deliver(.resync)
        } refused: { _, error in
            await deliver(.error(error))
        }
    }
}

extension LiveGateConnection {
    /// A typed handle on a Live Service stream: cheap; listening is what costs.
    public func stream<Message: Codable & Sendable>(_ name: String, of type: Message.Type = Message.self) -> LiveStream<Message> {
        LiveStream(source: .connection(self), name: name)
    }
}

extension LiveGateClient {
    /// A typed handle on a Live Service stream whose listeners outlive the daemon's restarts.
    public func stream<Message: Codable & Sendable>(_ name: String, of type: Message.Type = Message.self) -> LiveStream<Message> {
        LiveStream(source: .client(self), name: name)
    }
}
