// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveGateProtocol
import LiveJSON

/// One state of a typed live collection window: the models in order, the change set that led to it, the
/// statuses, frozen.
public struct LiveCollectionSnapshot<Model: Sendable>: Sendable {
    /// The window's objects decoded as `Model`, in the query's order (an object that does not decode is
    /// left out, and `error` says so).
    public let models: [Model]
    /// The window's objects as the daemon sent them (ids, versions, raw data), in order.
    public let objects: [ObjectSnapshot]
    /// How the window changed from the previous snapshot: deletions in old indices, insertions in new,
    /// modifications as (old, new), moves as (from, to). Relative to an empty window when `reset`.
    public let changes: ChangeSet
    public let reset: Bool
    /// How many objects match the query in all.
    public let count: Int
    public let hasNext: Bool
    public let hasPrevious: Bool
    public let dataStatus: DataStatus
    public let loadingStatus: LoadingStatus
    public let error: LiveGateError?
    public let resync: Bool

    /// The object at `index` of the window (`objects[index]` decoded).
    public func object(at index: Int) -> ObjectSnapshot? { objects.indices.contains(index) ? objects[index] : nil }

    init(_ update: CollectionUpdate, as type: Model.Type) where Model: Decodable {
        var models: [Model] = []
        var failure: LiveGateError?
        for object in update.items {
            do {
                models.append(try object.data.decode(as: Model.self))
            } catch {
                failure = LiveGateError(code: nil, message: "\(object.collection)/\(object.id) does not decode as \(Model.self): \(error)")
            }
        }
        self.models = models
        objects = update.items
        changes = update.change.changes
        reset = update.change.reset == true
        count = update.change.count
        hasNext = update.change.hasNext
        hasPrevious = update.change.hasPrevious
        dataStatus = update.change.dataStatus
        loadingStatus = update.change.loadingStatus
        error = update.change.error.map(LiveGateError.init) ?? failure
        resync = update.change.resync == true
    }
}

/// A live query of the daemon, typed, in pages (the reference SDKs' `LiveCollection`).
///
/// ```swift
/// let messages = daemon.collection("messages", where: ["channel": "c1"], sort: SortParams(field: "at"), as: Message.self)
/// let observation = try await messages.observe { snapshot in print(snapshot.models, snapshot.changes) }
/// try await observation.nextPage()
/// ```
public struct LiveCollection<Model: Decodable & Sendable>: Sendable {
    public let connection: LiveGateConnection
    public let collection: String
    public let query: QueryParams?
    public let pageSize: Int?

    /// Calls `handler` with the window now and at every change, one after another on a task of the
    /// library's, until the returned observation's token is invalidated or released.
    public func observe(anchor: CollectionAnchorParam? = nil, _ handler: @escaping @Sendable (LiveCollectionSnapshot<Model>) -> Void)
        async throws -> LiveCollectionObservation
    {
        try await start(anchor: anchor, once: false) { handler($0) }
    }

    /// As ``observe(anchor:_:)``, calling `handler` on the main actor (for UI code).
    public func observeOnMainActor(
        anchor: CollectionAnchorParam? = nil,
        _ handler: @escaping @MainActor @Sendable (LiveCollectionSnapshot<Model>) -> Void
    ) async throws -> LiveCollectionObservation {
        try await start(anchor: anchor, once: false) { await handler($0) }
    }

    /// Calls `handler` exactly once with the window (cached if there is one, else fetched).
    public func observeOnce(_ handler: @escaping @Sendable (LiveCollectionSnapshot<Model>) -> Void) async throws -> LiveCollectionObservation {
        try await start(anchor: nil, once: true) { handler($0) }
    }

    private func start(
        anchor: CollectionAnchorParam?,
        once: Bool,
        _ deliver: @escaping @Sendable (LiveCollectionSnapshot<Model>) async -> Void
    ) async throws -> LiveCollectionObservation {
        let observation = try await connection.observeCollection(
            collection: collection,
            query: query,
            pageSize: pageSize,
            anchor: anchor,
            once: once
        )
        let task = connection.deliveryTask(observation.updates) { update in
            await deliver(LiveCollectionSnapshot(update, as: Model.self))
            return !once
        }
        let connection = self.connection
        let token = NotificationToken(token: observation.token, delivery: task) {
            if !once { connection.releaseInBackground(observation.token) }
        }
        return LiveCollectionObservation(connection: connection, notificationToken: token)
    }
}

/// A typed collection observation: its token, and the paging of its window.
public struct LiveCollectionObservation: Sendable {
    let connection: LiveGateConnection
    /// Ends the observation when invalidated or released.
    public let notificationToken: NotificationToken

    /// One more page at the end of the window; `false` when there is none. The new items arrive through the handler.
    @discardableResult
    public func nextPage() async throws -> Bool { try await connection.nextPage(token: notificationToken.token) }
    /// One more page at the start (for windows anchored at the last page); `false` when there is none.
    @discardableResult
    public func previousPage() async throws -> Bool { try await connection.previousPage(token: notificationToken.token) }
    /// Back to one page.
    @discardableResult
    public func resetPage() async throws -> Bool { try await connection.resetPage(token: notificationToken.token) }
    /// Objects of the window by index, `limit` from `offset`, as the daemon holds them now (windowed reads).
    public func objects(offset: Int, limit: Int) async throws -> [ObjectSnapshot] {
        try await connection.items(token: notificationToken.token, offset: offset, limit: limit).items
    }
    public func invalidate() { notificationToken.invalidate() }
}

extension LiveGateConnection {
    /// A typed live query: the collection's objects matching `where`, in `sort` order, in pages of `pageSize`.
    public func collection<Model: Decodable & Sendable>(
        _ collection: String,
        where filters: [String: JSONValue]? = nil,
        sort: SortParams? = nil,
        pageSize: Int? = nil,
        as type: Model.Type = Model.self
    ) -> LiveCollection<Model> {
        let query = filters == nil && sort == nil ? nil : QueryParams(where: filters, sort: sort)
        return LiveCollection(connection: self, collection: collection, query: query, pageSize: pageSize)
    }
}
