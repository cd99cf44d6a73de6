// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore

/// Maps collection tokens onto SDK collection observers, one to one. The SDK shares one observation (one
/// fetch, one realtime topic) between equal windows and gives every observer of one change the same
/// `emission` number; this encodes each emission once and writes the same bytes for every token.
///
/// The SDK calls observers serially on its actor, all observers of one emission in a row, so a one-entry
/// cache of the last encoded emission is all the sharing needs.
final class CollectionFanout: Sendable {
    private let engine: LiveClient
    /// Change bodies, and their full-state forms (made only for slow readers), by emission.
    private let bodies: EncodedOnce<Int>
    private let fullStates: EncodedOnce<Int>

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        bodies = EncodedOnce(logger: logger)
        fullStates = EncodedOnce(logger: logger)
    }

    /// How many notification bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { bodies.count }

    /// Observes `window` for a connection's token.
    func subscribe(
        _ window: CollectionWindow,
        once: Bool,
        outbox: ConnectionOutbox,
        token: Int64,
        onFinished: @escaping @Sendable () -> Void
    ) async -> CollectionSubscription {
        let prefix = NotificationFrame.prefix(method: NotificationMethod.collectionChanged, token: token)
        let collection = engine.collection(window.query, pageSize: window.pageSize, anchor: window.anchor, pages: window.pages)
        let handler: @Sendable (LiveCollectionChange) -> Void = { [self] change in
            guard let body = self.body(change) else { return }
            outbox.offer(token: token, prefix: prefix, body: body) { self.fullState(change) }
            if once { onFinished() }
        }
        let sdkToken = once ? await collection.observeOnce(handler) : await collection.observe(handler)
        return CollectionSubscription(sdkToken: sdkToken)
    }

    private func body(_ change: LiveCollectionChange) -> ByteBuffer? {
        bodies.body(change.emission) { try NotificationFrame.body(CollectionChangedBody(change, reset: false)) }
    }

    /// The change as a full state (`reset: true`), for a slow client whose pending notification it replaces.
    private func fullState(_ change: LiveCollectionChange) -> ByteBuffer? {
        fullStates.body(change.emission) {
            var whole = change
            whole.changes = ChangeSet.between(old: [String](), new: change.items.map(\.id))
            return try NotificationFrame.body(CollectionChangedBody(whole, reset: true))
        }
    }
}

/// A connection token's collection observation.
struct CollectionSubscription: Sendable {
    let sdkToken: LiveCollectionToken
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
