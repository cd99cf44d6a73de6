// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// What a collection feed subscriber hears (Kinvey's collection subscription: `onReady` / `onNext` /
/// `onStatus` / `onError`), deletions included, which Kinvey could not send.
public enum LiveFeedEvent: Sendable, Equatable {
    /// The cloud has the subscription: every change of the collection from now on follows.
    case ready
    /// One change of an object of the collection, with the cloud's event sequence number (strictly
    /// increasing): a creation, an update, or a deletion (`entity.deleted`, with its last version + 1).
    case next(Entity, seq: Int64)
    /// The realtime connection's status changed. Changes made while it was down are replayed on reconnect
    /// (in order, none missing) when the cloud's log reaches back far enough; otherwise ``resync`` follows.
    case status(ConnectionStatus)
    /// Changes made while the connection was down could not be replayed: some may be missing.
    case resync
    /// The cloud refused the subscription when it was made again on reconnect. Nothing more arrives (no
    /// `resync` for this connection) until the cloud accepts it again on a later reconnection: then the
    /// changes made meanwhile are replayed, or ``resync`` says some may be missing.
    case error(LiveError)
}

/// One delivery to a feed subscriber: the event and its emission number, the same for every subscriber
/// that hears the same event (so a consumer can encode it once for all of them).
public struct LiveFeedDelivery: Sendable, Equatable {
    public let event: LiveFeedEvent
    public let emission: Int
}

/// One subscriber of a collection feed.
struct FeedListener: Sendable {
    let handler: @Sendable (LiveFeedDelivery) -> Void
    var ready: Bool
}

extension LiveClient {
    /// Subscribes to every change of `collection` (Kinvey's collection subscription) until the token is
    /// invalidated or released. All subscribers of one collection share one realtime subscription (with
    /// each other and with the collection's live queries). The handler is called serially, on the
    /// engine's executor; `ready` comes first, at once when the realtime connection is up, else once it is.
    /// - Throws: ``LiveError`` `invalidArgument` (a bad name), `notPermitted` (the cloud's permissions).
    public func subscribeFeed(collection: String, _ handler: @escaping @Sendable (LiveFeedDelivery) -> Void) async throws(LiveError)
        -> NotificationToken
    {
        guard EntityKey.isValidName(collection) else {
            throw LiveError(code: .invalidArgument, message: "a collection name is 1-128 characters of A-Z a-z 0-9 _ - . (got \"\(collection)\")")
        }
        let topic = Topic.collection(collection)
        subscribers.feeds.nextID += 1
        let id = subscribers.feeds.nextID
        subscribers.feeds.listeners[topic, default: [:]][id] = FeedListener(handler: handler, ready: false)
        if let refusal = await realtime.acquire(topic) {
            subscribers.feeds.listeners[topic]?[id] = nil
            if subscribers.feeds.listeners[topic]?.isEmpty == true { subscribers.feeds.listeners[topic] = nil }
            throw LiveError(subscriptionRefusal: refusal.code, message: refusal.message ?? "refused", topic: topic)
        }
        if await realtime.status == .connected, subscribers.feeds.listeners[topic]?[id]?.ready == false {
            subscribers.feeds.listeners[topic]?[id]?.ready = true
            subscribers.feedEmissions += 1
            handler(LiveFeedDelivery(event: .ready, emission: subscribers.feedEmissions))
        }
        return NotificationToken { [weak self] in
            Task { await self?.unsubscribeFeed(topic, id) }
        }
    }

    private func unsubscribeFeed(_ topic: Topic, _ id: Int) async {
        guard subscribers.feeds.listeners[topic]?[id] != nil else { return }
        subscribers.feeds.listeners[topic]?[id] = nil
        if subscribers.feeds.listeners[topic]?.isEmpty == true { subscribers.feeds.listeners[topic] = nil }
        await realtime.release(topic)
    }

    /// Hands an event to every subscriber of the topic, in a row, under one emission number: to those that
    /// are ready, and a refusal to those still waiting for the connection too.
    func feedEvent(_ topic: Topic, _ event: LiveFeedEvent) {
        guard let listeners = subscribers.feeds.listeners[topic] else { return }
        subscribers.feedEmissions += 1
        let delivery = LiveFeedDelivery(event: event, emission: subscribers.feedEmissions)
        let toAll = if case .error = event { true } else { false }
        for listener in listeners.values where listener.ready || toAll { listener.handler(delivery) }
    }

    func feedStatusChanged(_ status: ConnectionStatus) {
        for topic in subscribers.feeds.listeners.keys { feedEvent(topic, .status(status)) }
    }

    /// After (re)connecting: subscribers waiting for the connection are ready now; those of topics the
    /// cloud could not resume are told changes may be missing. Those of topics it refused were told so
    /// (``LiveFeedEvent/error(_:)``) and hear nothing more until a later connection is accepted.
    func feedsConnected(needRefresh: Set<Topic>, refused: Set<Topic>) {
        for topic in subscribers.feeds.listeners.keys where !refused.contains(topic) {
            if needRefresh.contains(topic) { feedEvent(topic, .resync) }
            let waiting = subscribers.feeds.listeners[topic]?.filter { !$0.value.ready } ?? [:]
            guard !waiting.isEmpty else { continue }
            subscribers.feedEmissions += 1
            let delivery = LiveFeedDelivery(event: .ready, emission: subscribers.feedEmissions)
            for (id, listener) in waiting {
                subscribers.feeds.listeners[topic]?[id]?.ready = true
                listener.handler(delivery)
            }
        }
    }
}
