// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateProtocol
import LiveJSON
import LiveSDK
import Logging
import NIOCore
import Synchronization

/// One observed object, shared by every connection token that observes it: one SDK observation, and each
/// change encoded once into a body that every token's prefix is written before.
final class ObjectTopic: Sendable {
    /// One connection token on this topic.
    struct Subscriber {
        let outbox: ConnectionOutbox
        let token: Int64
        /// `{"jsonrpc":"2.0","method":"object.changed","params":{"token":N,` — built once per token.
        let prefix: ByteBuffer
        var filter: ObserverFilter
        /// A re-observation's last version seen: no snapshot of this version or older is sent again (a resync
        /// notice is, and so is a deletion).
        let sinceVersion: Int64?
        /// Called when a once-token has fired, so its connection forgets it.
        let onFinished: @Sendable () -> Void

        /// - Parameter fields: the token hears only of changes to these top-level fields (the engine's
        ///   ``ObserverFilter``, its own: boxed, so tokens without one pay a pointer).
        init(
            outbox: ConnectionOutbox,
            token: Int64,
            prefix: ByteBuffer,
            options: ObserveOptions,
            sinceVersion: Int64?,
            onFinished: @escaping @Sendable () -> Void
        ) {
            self.outbox = outbox
            self.token = token
            self.prefix = prefix
            self.filter = ObserverFilter(options: options)
            self.sinceVersion = sinceVersion
            self.onFinished = onFinished
        }

        /// Whether the token receives `change`.
        mutating func admits(_ change: LiveObjectChange) -> Bool {
            if let sinceVersion, !change.resync, let version = change.snapshot?.version, version <= sinceVersion { return false }
            return filter.admit(change)
        }
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        /// The latest change and its encoded body: what a joining token receives at once.
        var last: (change: LiveObjectChange, body: ByteBuffer)?
        var sdkToken: NotificationToken?
        var closed = false
    }

    let key: EntityKey
    private let state = Mutex(State())
    private let logger: Logger

    init(key: EntityKey, logger: Logger) {
        self.key = key
        self.logger = logger
    }

    /// Adds a token; it receives the current state at once when there is one its filter admits.
    /// Returns the subscriber id, or `nil` when the topic has closed meanwhile (the caller retries on a new topic).
    func add(_ subscriber: Subscriber) -> Int? {
        var subscriber = subscriber
        let (id, finished) = state.withLock { state -> (Int?, Bool) in
            guard !state.closed else { return (nil, false) }
            state.nextID += 1
            if let last = state.last, subscriber.admits(last.change) {
                subscriber.outbox.offer(token: subscriber.token, prefix: subscriber.prefix, body: last.body)
            }
            if subscriber.filter.finished { return (state.nextID, true) }
            state.subscribers[state.nextID] = subscriber
            return (state.nextID, false)
        }
        if finished { subscriber.onFinished() }
        return id
    }

    /// Removes a token. Returns `true` when it was the last one: the topic is then closed and its SDK
    /// observation released.
    func remove(_ id: Int) -> Bool {
        let (isLast, token) = state.withLock { state -> (Bool, NotificationToken?) in
            state.subscribers[id] = nil
            guard state.subscribers.isEmpty, !state.closed else { return (false, nil) }
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

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// The SDK observation's handler: encode once, offer the same bytes to every admitting token.
    func emit(_ change: LiveObjectChange) {
        let body: ByteBuffer
        do {
            body = try NotificationFrame.body(ObjectChangedBody(change))
        } catch {
            logger.error("could not encode a notification", metadata: ["topic": "\(key)", "error": "\(error)"])
            return
        }
        let finished = state.withLock { state -> [@Sendable () -> Void] in
            state.last = (change, body)
            var finishedIDs: [Int] = []
            // In place, by index: iterating `(id, var subscriber)` and writing each back copied every
            // subscriber (four reference counts each) and, mutating the table it iterated, the whole table.
            var index = state.subscribers.values.startIndex
            while index != state.subscribers.values.endIndex {
                defer { index = state.subscribers.values.index(after: index) }
                guard state.subscribers.values[index].admits(change) else { continue }
                // Fields read in place (a `let` copy of the subscriber would count its references again).
                state.subscribers.values[index].outbox.offer(
                    token: state.subscribers.values[index].token,
                    prefix: state.subscribers.values[index].prefix,
                    body: body
                )
                if state.subscribers.values[index].filter.finished { finishedIDs.append(state.subscribers.keys[index]) }
            }
            return finishedIDs.compactMap { state.subscribers.removeValue(forKey: $0)?.onFinished }
        }
        for callback in finished { callback() }
    }
}

extension ObjectChangedBody {
    /// The wire form of an engine change.
    init(_ change: LiveObjectChange) {
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
