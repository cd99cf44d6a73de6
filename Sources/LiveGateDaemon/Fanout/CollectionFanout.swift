// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps collection tokens onto SDK collection observers, one to one. The SDK shares one observation (one
/// fetch, one realtime topic) between equal windows and gives every observer of one change the same
/// `emission` number; this encodes each emission once, and its tokens' shares (``TokenFanout``) write the same
/// bytes for every token.
///
/// The SDK calls observers serially on its actor, all observers of one emission in a row, so a one-entry
/// cache of the last encoded emission is all the sharing needs.
final class CollectionFanout: Sendable {
    /// A change's body, and its full-state form, made only for a client behind.
    private struct Encoded: Sendable {
        let body: ByteBuffer
        let fullState: ConnectionOutbox.FullState
    }

    private let engine: LiveClient
    private let encoded: EncodedOnce<Int, Encoded>
    /// Full states, by emission.
    private let fullStates: EncodedOnce<Int, ByteBuffer>
    private let shares = TokenShares()

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        encoded = EncodedOnce(logger: logger)
        fullStates = EncodedOnce(logger: logger)
    }

    /// How many notification bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encoded.count }

    /// Observes `window` for a connection's token; `answer`, when given, is queued on the connection's loop right
    /// before the token joins its share (so before its first notification).
    func subscribe(
        _ window: CollectionWindow,
        once: Bool,
        outbox: ConnectionOutbox,
        eventLoop: any EventLoop,
        token: Int64,
        answer: LoopAnswer?,
        onFinished: @escaping @Sendable () -> Void
    ) async -> CollectionSubscription {
        let prefix = NotificationFrame.prefix(method: NotificationMethod.collectionChanged, token: token)
        let member = TokenFanout.Member(outbox: outbox, token: token, prefixes: [prefix], coalesces: true, once: once, onFinished: onFinished)
        let membership = shares.join(member, on: eventLoop, answer: answer)
        let collection = engine.collection(window.query, pageSize: window.pageSize, anchor: window.anchor, pages: window.pages)
        let handler: @Sendable (LiveCollectionChange) -> Void = { [self] change in
            guard let encoded = self.encoded(change) else { return }
            let notification = TokenFanout.Change(emission: change.emission, fullState: encoded.fullState)
            membership.share.submit(.deliver(notification, encoded.body, to: [membership.id]))
        }
        let sdkToken = once ? await collection.observeOnce(handler) : await collection.observe(handler)
        return CollectionSubscription(sdkToken: sdkToken, membership: membership)
    }

    private func encoded(_ change: LiveCollectionChange) -> Encoded? {
        encoded.encoded(change.emission) {
            let body = try NotificationFrame.body(CollectionChangedBody(change, reset: false))
            return Encoded(body: body) { [self] in self.fullState(change) }
        }
    }

    /// The change as a full state (`reset: true`), for a slow client whose pending notification it replaces.
    private func fullState(_ change: LiveCollectionChange) -> ByteBuffer? {
        fullStates.encoded(change.emission) {
            var whole = change
            whole.changes = ChangeSet.between(old: [String](), new: change.items.map(\.id))
            return try NotificationFrame.body(CollectionChangedBody(whole, reset: true))
        }
    }
}

/// A connection token's collection observation.
struct CollectionSubscription: Sendable {
    let sdkToken: LiveCollectionToken
    let membership: TokenMembership

    /// Ends it: the engine's observer, then the token's place on its share.
    func end() {
        sdkToken.invalidate()
        membership.leave()
    }
}

extension CollectionChangedBody {
    /// The wire form of an engine change: the snapshots of inserted and modified items at their new index.
    init(_ change: LiveCollectionChange, reset: Bool) {
        var items: [String: ObjectSnapshot] = [:]
        for index in change.changes.insertions + change.changes.modifications.map(\.new) {
            items[String(index)] = ObjectSnapshot(change.items[index])
        }
        self.init(
            count: change.count,
            size: change.items.count,
            changes: change.changes,
            items: items,
            hasNext: change.hasNext,
            hasPrevious: change.hasPrevious,
            dataStatus: LiveGateProtocol.DataStatus(rawValue: change.dataStatus.rawValue) ?? .error,
            loadingStatus: LiveGateProtocol.LoadingStatus(rawValue: change.loadingStatus.rawValue) ?? .error,
            error: change.error.map(RPCError.init),
            resync: change.resync ? true : nil,
            reset: reset ? true : nil,
            pendingIds: change.pendingIDs.isEmpty ? nil : change.pendingIDs.sorted()
        )
    }
}

extension ObjectSnapshot {
    init(_ entity: Entity) {
        self.init(collection: entity.collection, id: entity.id, version: entity.version, data: entity.data, updatedAt: entity.updatedAt)
    }
}
