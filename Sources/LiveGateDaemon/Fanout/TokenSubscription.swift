// Licensed under the Apache License, Version 2.0.

import LiveSDK

/// What a connection token observes.
enum TokenSubscription: Sendable {
    case object(ObjectTopicHub.Subscription)
    case collection(CollectionSubscription)
    /// A stream listener or a feed subscription.
    case news(NewsSubscription)

    /// Releases it: the object topic's share, or the SDK collection observer, stream listener or feed subscription
    /// and the token's place on its share.
    func end(_ context: DaemonContext) {
        switch self {
        case .object(let subscription): context.hub.unsubscribe(subscription)
        case .collection(let subscription): subscription.end()
        case .news(let subscription): subscription.end()
        }
    }
}

/// A token hearing news (a stream listener, a feed subscription): the SDK's token, and its place on its share,
/// held until its answer is queued.
struct NewsSubscription: Sendable {
    let sdkToken: NotificationToken
    let membership: TokenMembership

    /// Lets the token's notifications through, `answer` first (those that came before follow it, in order).
    func open(answer: LoopAnswer?) { membership.open(answer: answer) }

    func end() {
        sdkToken.invalidate()
        membership.leave()
    }
}
