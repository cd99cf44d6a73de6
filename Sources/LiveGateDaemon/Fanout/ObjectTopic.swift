// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveJSON
import LiveSDK
import Logging
import NIOCore
import Synchronization

/// One observed object, shared by every connection token that observes it: one SDK observation, and each
/// change encoded once into a body that every token's prefix is written before. The tokens are kept by event
/// loop (``ObjectTopicShare``): a change is handed to each loop once, and each loop offers it to its tokens.
package final class ObjectTopic: Sendable {
    /// One connection token on this topic.
    package struct Subscriber: Sendable {
        let outbox: ConnectionOutbox
        /// The event loop of the token's connection, where it is offered its notifications.
        let eventLoop: any EventLoop
        let token: Int64
        /// `{"jsonrpc":"2.0","method":"object.changed","params":{"token":N,` — built once per token.
        let prefix: ByteBuffer
        var filter: ObserverFilter
        /// Whether `filter` decides by the change alone (``ObserverFilter/isStateless``): then the decision
        /// made once per change for its policy is this token's too.
        let stateless: Bool
        /// A re-observation's last version seen, until the token is sent its first notification: until then
        /// nothing the client holds already is sent (no snapshot of this version or older without an error, nor
        /// the start's "nothing known yet"); a resync notice, a deletion or a failed load is. Cleared by the first
        /// notification: after it, the full state follows whatever its version, so a token told of a resync
        /// hears how the refetch ended even when it found the version the token had (ObjectTopicShareTests).
        var sinceVersion: Int64?
        /// A re-observation whose first snapshot is yet to come: when that one is not the version right after
        /// `sinceVersion` (or after the deletion told before it), the versions between were missed (the daemon
        /// restarted, or the token's previous life ended, while the object changed), and a resync notice goes
        /// first.
        var checksSinceGap: Bool
        /// Whether the deletion told since `sinceVersion` is counted in `sinceBaseline` already: told again (after
        /// a resync notice, or a reload), it is the same deletion, not another version.
        var countedSinceDeletion = false
        /// The version the token's client holds as far as this token told it: `sinceVersion`, one more for a
        /// deletion told since.
        var sinceBaseline: Int64?
        /// Whether a re-observation is told that the version it holds is confirmed (``confirmation(_:)``).
        let confirmsSince: Bool
        /// Called when a once-token has fired, so its connection forgets it.
        let onFinished: @Sendable () -> Void

        /// - Parameter fields: the token hears only of changes to these top-level fields (the engine's
        ///   ``ObserverFilter``, its own: boxed, so tokens without one pay a pointer).
        package init(
            outbox: ConnectionOutbox,
            eventLoop: any EventLoop,
            token: Int64,
            prefix: ByteBuffer,
            options: ObserveOptions,
            sinceVersion: Int64?,
            onFinished: @escaping @Sendable () -> Void
        ) {
            self.outbox = outbox
            self.eventLoop = eventLoop
            self.token = token
            self.prefix = prefix
            self.filter = ObserverFilter(options: options)
            self.stateless = filter.isStateless
            self.sinceVersion = sinceVersion
            self.checksSinceGap = sinceVersion != nil && !options.once
            self.sinceBaseline = sinceVersion
            self.confirmsSince = sinceVersion != nil && !options.once
            self.onFinished = onFinished
        }

        /// The notice that a re-observation's `sinceVersion` is the object's confirmed version (`unchanged`,
        /// no snapshot: the client keeps what it holds, now `fresh`/`loaded`), when `facts` is the first such
        /// state and nothing was told before it; it counts as told.
        mutating func confirmation(_ facts: ChangeFacts) -> ByteBuffer? {
            guard confirmsSince, let sinceVersion, facts.confirmed, facts.version == sinceVersion else { return nil }
            self.sinceVersion = nil
            checksSinceGap = false
            return Self.unchangedNotice
        }

        private static let unchangedNotice = try? NotificationFrame.body(
            ObjectChangedBody(snapshot: nil, dataStatus: .fresh, loadingStatus: .loaded, unchanged: true)
        )

        /// The resync notice to send before `change` (the first this token is sent), if the versions between
        /// its `sinceVersion` and the change's were missed; clears the check either way. Per token, once per
        /// re-observation: not on the hot path.
        mutating func gapNotice(before change: LiveObjectChange) -> ByteBuffer? {
            guard checksSinceGap, !change.resync else { return nil }
            guard let version = change.version else {
                // A deletion (its own version, one more) or nothing known yet: the first snapshot decides.
                if change.dataStatus == .notExist, change.loadingStatus == .loaded, !countedSinceDeletion {
                    sinceBaseline = sinceBaseline.map { $0 + 1 }
                    countedSinceDeletion = true
                }
                return nil
            }
            checksSinceGap = false
            guard let sinceBaseline, version > sinceBaseline + 1, !change.pendingWrites else { return nil }
            let notice = ObjectChangedBody(
                snapshot: nil,
                dataStatus: LiveGateProtocol.DataStatus(rawValue: change.dataStatus.rawValue) ?? .error,
                loadingStatus: .loading,
                error: nil,
                resync: true,
                pendingWrites: nil
            )
            return try? NotificationFrame.body(notice)
        }

        /// Whether the token receives `change`.
        mutating func admits(_ change: LiveObjectChange) -> Bool {
            admits(ChangeFacts(change)) ?? filter.admit(change)
        }

        /// Whether the token receives the change `facts` describe, when that is known from them alone; `nil`
        /// when its filter has to see the change (``filter``'s `admit`). Reads nothing of the change itself:
        /// a copy of one counts references to everything in it, per token.
        func admits(_ facts: ChangeFacts) -> Bool? {
            if let sinceVersion, !facts.resync {
                if let version = facts.version, version <= sinceVersion, !facts.failed { return false }
                if facts.nothingKnownYet { return false }
            }
            return stateless ? facts.admitted(by: filter.policy) : nil
        }
    }

    /// What the tokens' decisions about one change depend on, worked out once per change (not per token).
    struct ChangeFacts {
        let version: Int64?
        let resync: Bool
        /// No data and still loading, nothing else said: an observation's start with nothing cached.
        let nothingKnownYet: Bool
        /// The change says a load failed (or the data cannot be kept current): told even at a version seen.
        let failed: Bool
        /// The cloud's data, current: a snapshot, `fresh`, `loaded`, nothing pending, failed or resynced.
        let confirmed: Bool
        /// Whether a stateless filter with each policy admits the change.
        let admittedLocalThenFresh: Bool
        let admittedFreshOnly: Bool

        init(_ change: LiveObjectChange) {
            version = change.version
            resync = change.resync
            nothingKnownYet =
                !change.hasSnapshot && change.dataStatus == .notExist && change.loadingStatus == .loading
                && !change.hasError && !change.pendingWrites && !change.resync
            failed = change.hasError || change.loadingStatus == .error || change.dataStatus == .error
            confirmed =
                change.hasSnapshot && change.dataStatus == .fresh && change.loadingStatus == .loaded && !change.pendingWrites
                && !change.resync && !failed
            admittedLocalThenFresh = ObserverFilter.admits(change, policy: .localThenFresh)
            admittedFreshOnly = ObserverFilter.admits(change, policy: .freshOnly)
        }

        func admitted(by policy: LiveSDK.ObservePolicy) -> Bool {
            switch policy {
            case .localThenFresh: admittedLocalThenFresh
            case .freshOnly: admittedFreshOnly
            }
        }
    }

    private struct State {
        /// The tokens' shares, one per event loop with tokens (a few at most: an array, not a dictionary).
        var shares: [ObjectTopicShare] = []
        /// Tokens on the topic (each one's share is the caller's to name when it leaves).
        var members = 0
        var nextID = 0
        /// The latest change: what a joining token receives at once.
        var last: LiveObjectChange?
        var sdkToken: NotificationToken?
        var closed = false
        /// A `freshOnly` token joined: the engine reads the object at once rather than with a burst's
        /// (``ObservationRequest/activatesAtOnce``).
        var freshOnlyJoined = false
    }

    let key: EntityKey
    private let state = Mutex(State())
    private let logger: Logger

    package init(key: EntityKey, logger: Logger) {
        self.key = key
        self.logger = logger
    }

    /// Adds a token; it receives the current state at once when there is one its filter admits (on its
    /// connection's loop, before anything queued there after this call), after `answer` (its connection's
    /// answer giving it the token), when given. Returns the subscriber id and its share, which
    /// ``remove(_:from:)`` takes, or `nil` when the topic has closed meanwhile (the caller retries on a new
    /// topic; `answer` was not queued).
    package func add(_ subscriber: Subscriber, answer: LoopAnswer? = nil) -> (id: Int, share: ObjectTopicShare)? {
        state.withLock { state -> (Int, ObjectTopicShare)? in
            guard !state.closed else { return nil }
            state.nextID += 1
            let loop = ObjectIdentifier(subscriber.eventLoop)
            let share: ObjectTopicShare
            if let existing = state.shares.first(where: { ObjectIdentifier($0.eventLoop) == loop }) {
                share = existing
            } else {
                share = ObjectTopicShare(eventLoop: subscriber.eventLoop)
                state.shares.append(share)
            }
            state.members += 1
            if subscriber.filter.policy == .freshOnly { state.freshOnlyJoined = true }
            // Queued under the lock, like every change: the share sees joins and changes in the topic's order.
            share.submit(.add(id: state.nextID, subscriber, last: state.last, answer: answer))
            return (state.nextID, share)
        }
    }

    /// Whether a `freshOnly` token joined the topic (its engine observation is then read at once).
    package var wantsFreshAtOnce: Bool { state.withLock { $0.freshOnlyJoined } }

    /// Whether the object is yet to be read from the cloud: nothing told yet, or its cached copy only.
    package var awaitsItsRead: Bool { state.withLock { $0.last.map { $0.loadingStatus == .loading } ?? true } }

    /// Removes a token, once: `id` and `share` are what ``add(_:)`` returned for it. Returns `true` when it was
    /// the last one: the topic is then closed and its SDK observation released.
    func remove(_ id: Int, from share: ObjectTopicShare) -> Bool {
        let (isLast, token) = state.withLock { state -> (Bool, NotificationToken?) in
            guard state.members > 0 else { return (false, nil) }
            state.members -= 1
            share.submit(.remove(id: id))
            guard state.members == 0, !state.closed else { return (false, nil) }
            state.closed = true
            defer { state.sdkToken = nil }
            return (true, state.sdkToken)
        }
        token?.invalidate()
        return isLast
    }

    /// Keeps the SDK observation's token (or releases it at once when the topic closed while it was created).
    func attach(_ sdkToken: NotificationToken) {
        let release = state.withLock { state -> Bool in
            if state.closed { return true }
            state.sdkToken = sdkToken
            return false
        }
        if release { sdkToken.invalidate() }
    }

    var subscriberCount: Int { state.withLock { $0.members } }

    /// The SDK observation's handler: encode once, hand the same bytes to every event loop with tokens.
    package func emit(_ change: LiveObjectChange) {
        let body: ByteBuffer
        do {
            body = try NotificationFrame.body(ObjectChangedBody(change))
        } catch {
            logger.error("could not encode a notification", metadata: ["topic": "\(key)", "error": "\(error)"])
            return
        }
        state.withLock { state in
            state.last = change
            for share in state.shares { share.submit(.deliver(change, body)) }
        }
    }
}

extension ObjectChangedBody {
    /// The wire form of an engine change.
    package init(_ change: LiveObjectChange) {
        self.init(
            snapshot: change.snapshot.map(ObjectSnapshot.init),
            dataStatus: LiveGateProtocol.DataStatus(rawValue: change.dataStatus.rawValue) ?? .error,
            loadingStatus: LiveGateProtocol.LoadingStatus(rawValue: change.loadingStatus.rawValue) ?? .error,
            error: change.error.map(RPCError.init),
            resync: change.resync ? true : nil,
            pendingWrites: change.pendingWrites ? true : nil
        )
    }
}
