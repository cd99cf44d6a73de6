// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveCloudAPI
import LiveGateProtocol
import LiveSDK
import Logging
import NIOCore
import Synchronization

/// Maps collection tokens onto SDK collection observers, one to one. The SDK shares one observation (one
/// fetch, one realtime topic) between equal windows and gives every observer of one change the same
/// `emission` number; this encodes each emission once and writes the same bytes for every token.
///
/// The SDK calls observers serially on its actor, all observers of one emission in a row, so a one-entry
/// cache of the last encoded emission is all the sharing needs.
final class CollectionFanout: Sendable {
    private struct Encoded {
        let emission: Int
        let body: ByteBuffer
        var fullState: ByteBuffer?
    }

    private let engine: LiveClient
    private let logger: Logger
    private let last = Mutex<Encoded?>(nil)
    private let encodings = Atomic<Int>(0)

    init(engine: LiveClient, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    /// How many notification bodies were encoded (for `daemon.stats` and the tests of encode-once).
    var encodedBodies: Int { encodings.load(ordering: .relaxed) }

    /// Observes `window` for a connection's token.
    func subscribe(
        _ window: CollectionWindow,
        once: Bool,
        outbox: ConnectionOutbox,
        token: Int64,
        onFinished: @escaping @Sendable () -> Void
    ) async -> CollectionSubscription {
        let prefix = NotificationFrame.prefix(method: NotificationMethod.collectionChanged, token: token)
        let collection = engine.collection(window.query, pageSize: window.pageSize, anchor: window.anchor)
        let handler: @Sendable (LiveCollectionChange) -> Void = { [self] change in
            guard let body = self.body(change) else { return }
            outbox.offer(token: token, prefix: prefix, body: body) { self.fullState(change) }
            if once { onFinished() }
        }
        let sdkToken = once ? await collection.observeOnce(handler) : await collection.observe(handler)
        return CollectionSubscription(sdkToken: sdkToken)
    }

    private func body(_ change: LiveCollectionChange) -> ByteBuffer? {
        if let cached = last.withLock({ $0?.emission == change.emission ? $0?.body : nil }) { return cached }
        do {
            let body = try NotificationFrame.body(CollectionChangedBody(change, reset: false))
            encodings.add(1, ordering: .relaxed)
            last.withLock { $0 = Encoded(emission: change.emission, body: body) }
            return body
        } catch {
            logger.error("could not encode a notification", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// The change as a full state (`reset: true`), for a slow client whose pending notification it replaces.
    private func fullState(_ change: LiveCollectionChange) -> ByteBuffer? {
        if let cached = last.withLock({ $0?.emission == change.emission ? $0?.fullState : nil }) { return cached }
        var whole = change
        whole.changes = ChangeSet.between(old: [String](), new: change.items.map(\.id))
        guard let body = try? NotificationFrame.body(CollectionChangedBody(whole, reset: true)) else { return nil }
        last.withLock { if $0?.emission == change.emission { $0?.fullState = body } }
        return body
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
            reset: reset ? true : nil
        )
    }
}

extension ObjectSnapshot {
    init(_ entity: Entity) {
        self.init(collection: entity.collection, id: entity.id, version: entity.version, data: entity.data, updatedAt: entity.updatedAt)
    }
}
