// Licensed under the Apache License, Version 2.0.

import LiveSDK

/// What a connection token observes.
enum TokenSubscription: Sendable {
    case object(ObjectTopicHub.Subscription)
    case collection(CollectionSubscription)
    /// A stream listener or a feed subscription.
    case gated(GatedSubscription)

    /// Releases it: the object topic's share, or the SDK collection observer, stream listener or feed subscription.
    func end(_ context: DaemonContext) {
        switch self {
        case .object(let subscription): context.hub.unsubscribe(subscription)
        case .collection(let subscription): subscription.sdkToken.invalidate()
        case .gated(let subscription): subscription.sdkToken.invalidate()
        }
    }
}
