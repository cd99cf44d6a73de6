// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol

/// Collection feeds (Kinvey's collection subscription) through the daemon.
///
/// ```swift
/// let feed = try await daemon.subscribeFeed(collection: "messages")
/// for try await event in feed.events where event.event == .next {
///     print(event.deleted == true ? "deleted" : "changed", event.snapshot?.id ?? "")
/// }
/// ```
extension LiveGateConnection {
    /// Every change of the collection (creations, updates, deletions) from now on, until the token is
    /// invalidated: `ready` first, then `next` events in the cloud's order; `status`, `resync` and `error`
    /// as the daemon's link to the cloud goes.
    /// - Throws: ``LiveGateError`` `notPermitted` when the cloud does not let the daemon's user read it.
    public func subscribeFeed(collection: String) async throws -> CollectionFeed {
        let slot = ResponseSlot<CollectionFeed>()
        try await send(Method.feedSubscribe, FeedSubscribeParams(collection: collection), .feed(slot))
        return try await slot.value()
    }
}

/// A feed token and its events, until it is invalidated or the connection ends.
public struct CollectionFeed: Sendable {
    public let token: Int64
    public let events: AsyncThrowingStream<FeedEventBody, any Error>
}
