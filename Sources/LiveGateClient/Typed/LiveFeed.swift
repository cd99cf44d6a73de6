// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol

/// What a typed collection feed hears (Kinvey's collection subscription: `ready`, then one event per change).
public enum LiveFeedEvent<Model: Sendable>: Sendable {
    /// The subscription is in place: every change from now on follows.
    case ready
    /// One change: the object as stored after it, decoded (`nil` for a deletion, or when it does not decode:
    /// then `decodingError` says why), with the cloud's sequence number.
    case next(_ model: Model?, snapshot: ObjectSnapshot?, deleted: Bool, seq: Int64?, decodingError: LiveGateError?)
    /// The daemon's realtime link changed: `offline`, `connecting`, `connected` or `reconnecting`.
    case status(String)
    /// Changes may be missing: made while the daemon's link was down, they could not be replayed; or
    /// (through a ``LiveGateClient``) the daemon was away and the subscription was made again.
    case resync
    /// The cloud refused the subscription as the daemon remade it.
    case error(LiveGateError)

    init(_ body: FeedEventBody, as type: Model.Type) where Model: Decodable {
        switch body.event {
        case .ready: self = .ready
        case .status: self = .status(body.status ?? "")
        case .resync: self = .resync
        case .error: self = .error(body.error.map(LiveGateError.init) ?? LiveGateError(code: nil, message: "the feed failed"))
        case .next:
            let deleted = body.deleted == true
            var model: Model?
            var failure: LiveGateError?
            if !deleted, let data = body.snapshot?.data {
                do {
                    model = try data.decode(as: Model.self)
                } catch {
                    failure = LiveGateError(code: nil, message: "the object's data does not decode as \(Model.self): \(error)")
                }
            }
            self = .next(model, snapshot: body.snapshot, deleted: deleted, seq: body.seq, decodingError: failure)
        }
    }
}

/// A collection's changes, typed: every creation, update and deletion from now on.
///
/// ```swift
/// let token = try await daemon.feed(collection: "messages", of: Message.self).subscribe { event in
///     if case .next(let message, let snapshot, let deleted, _, _) = event { print(snapshot?.id ?? "", deleted, message as Any) }
/// }
/// ```
public struct LiveFeed<Model: Decodable & Sendable>: Sendable {
    let source: ConnectionSource
    public let collection: String

    /// Calls `handler` with every event, one after another, until the returned token is invalidated or released.
    public func subscribe(_ handler: @escaping @Sendable (LiveFeedEvent<Model>) -> Void) async throws -> NotificationToken {
        try await start { event in handler(event) }
    }

    /// As ``subscribe(_:)``, calling `handler` on the main actor.
    public func subscribeOnMainActor(_ handler: @escaping @MainActor @Sendable (LiveFeedEvent<Model>) -> Void) async throws
        -> NotificationToken
    {
        try await start { event in await handler(event) }
    }

    private func start(_ deliver: @escaping @Sendable (LiveFeedEvent<Model>) async -> Void) async throws -> NotificationToken {
        let collection = self.collection
        let loop = ObservationLoop<FeedEventBody>(source: source, once: false) { connection in
            let feed = try await connection.subscribeFeed(collection: collection)
            return (feed.token, feed.events)
        }
        return try await loop.start(()) { _, event in
            await deliver(LiveFeedEvent(event, as: Model.self))
            return true
        } resumed: { _ in
            await deliver(.resync)
        } refused: { _, error in
            await deliver(.error(error))
        }
    }
}

extension LiveGateConnection {
    /// A typed handle on a collection's feed: cheap; subscribing is what costs.
    public func feed<Model: Decodable & Sendable>(collection: String, of type: Model.Type = Model.self) -> LiveFeed<Model> {
        LiveFeed(source: .connection(self), collection: collection)
    }
}

extension LiveGateClient {
    /// A typed handle on a collection's feed whose subscribers outlive the daemon's restarts (they get
    /// `.resync`, then `.ready` again).
    public func feed<Model: Decodable & Sendable>(collection: String, of type: Model.Type = Model.self) -> LiveFeed<Model> {
        LiveFeed(source: .client(self), collection: collection)
    }
}
