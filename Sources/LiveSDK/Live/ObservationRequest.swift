// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// One observation for ``LiveClient/observe(_:)``: what ``LiveObject/observe(options:_:)`` takes.
public struct ObservationRequest: Sendable {
    public var key: EntityKey
    public var options: ObserveOptions
    /// The observer waits for fresh data (a reader that skips the cached copy, as the daemon's `freshOnly`
    /// tokens do): the object is read from the cloud as soon as its start is read, not held with a burst's
    /// cached copies until the burst pauses (``LiveSDKConfiguration/activationPause``). An observation of the
    /// object that is so held already is read at once too. `options.policy` ``ObservePolicy/freshOnly`` implies it.
    public var activatesAtOnce: Bool
    public var handler: @Sendable (LiveObjectChange) -> Void

    public init(
        key: EntityKey,
        options: ObserveOptions = ObserveOptions(),
        activatesAtOnce: Bool = false,
        handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) {
        self.key = key
        self.options = options
        self.activatesAtOnce = activatesAtOnce || options.policy == .freshOnly
        self.handler = handler
    }
}

/// A live object: observe it to receive its current state and every change.
public struct LiveObject: Sendable {
    let client: LiveClient
    public let key: EntityKey

    /// Observes the object until the returned token is invalidated or released.
    ///
    /// The handler is called serially, on the engine's executor; it must return quickly (hand work off).
    /// See ``LiveObjectState`` for the order of emissions.
    public func observe(
        options: ObserveOptions = ObserveOptions(),
        _ handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) async -> NotificationToken {
        await client.observe(key, options: options, handler: handler)
    }

    /// Observes exactly one change: the cached version if there is one, else the fetch's outcome.
    public func observeOnce(
        policy: ObservePolicy = .localThenFresh,
        _ handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) async -> NotificationToken {
        await client.observe(key, options: ObserveOptions(policy: policy, once: true), handler: handler)
    }
}
