// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveGateProtocol
import LiveJSON
import Synchronization

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
    /// The ids of the window's objects that include writes of this host not confirmed yet, sorted.
    public let pendingIDs: [String]

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
        pendingIDs = update.change.pendingIds ?? []
    }
}

/// A live query of the daemon, typed, in pages (the reference SDKs' `LiveCollection`).
///
/// ```swift
/// let messages = daemon.collection("messages", where: ["channel": "c1"], sort: SortParams(field: "at"), as: Message.self)
/// let observation = try await messages.observe { snapshot in print(snapshot.models, snapshot.changes) }
/// try await observation.nextPage()
/// ```
///
/// Made from a ``LiveGateClient``, its observations outlive the daemon: when the connection is lost the
/// handler gets the window it has with `loadingStatus: loading`; the first update after the reconnection has
/// `reset: true` (its changes start from an empty window and carry the whole window again, changes made
/// meanwhile included), and the pages the observation had are fetched again, arriving as further updates.
public struct LiveCollection<Model: Decodable & Sendable>: Sendable {
    let source: ConnectionSource
    public let collection: String
    public let query: QueryParams?
    public let pageSize: Int?

    /// Every state of the window, in order, until the observation ends: invalidated, or the task iterating
    /// the sequence cancelled. Page it through the returned observation.
    public func snapshots(anchor: CollectionAnchorParam? = nil) async throws -> (
        observation: LiveCollectionObservation, snapshots: AsyncThrowingStream<LiveCollectionSnapshot<Model>, any Error>
    ) {
        let (stream, sink) = AsyncThrowingStream.makeStream(of: LiveCollectionSnapshot<Model>.self)
        let observation = try await start(anchor: anchor, once: false, ended: { sink.finish() }) { sink.yield($0) }
        let token = observation.notificationToken
        sink.onTermination = { _ in token.invalidate() }
        return (observation, stream)
    }

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

    /// What a collection observation keeps across reconnections: the last update delivered, and whether the
    /// next one starts a new window.
    private struct Delivered: Sendable {
        var last: CollectionUpdate?
        var startsWindow = false
    }

    private func start(
        anchor: CollectionAnchorParam?,
        once: Bool,
        ended: @escaping @Sendable () -> Void = {},
        _ deliver: @escaping @Sendable (LiveCollectionSnapshot<Model>) async -> Void
    ) async throws -> LiveCollectionObservation {
        let pages = PageMoves()
        let (collection, query, pageSize) = (self.collection, self.query, self.pageSize)
        let loop = ObservationLoop<CollectionUpdate>(source: source, once: once) { connection in
            // The pages it had before a reconnection, asked for at once: the window comes back whole.
            let moved = pages.moves.count
            let observation = try await connection.observeCollection(
                collection: collection,
                query: query,
                pageSize: pageSize,
                anchor: anchor,
                once: once,
                pages: moved > 0 ? 1 + moved : nil
            )
            return (observation.token, observation.updates)
        }
        let token = try await loop.start(Delivered(), ended: ended) { delivered, update in
            // After a reconnection the observer holds its window, `loading`: the new token's empty placeholder
            // (nothing cached, the fetch under way) is not passed on; the window comes back with its data.
            if delivered.startsWindow, delivered.last != nil, update.change.loadingStatus == .loading, update.change.dataStatus == .notExist,
                update.items.isEmpty
            {
                return true
            }
            var change = update.change
            if delivered.startsWindow { change.reset = true }  // a new daemon token's window starts from empty
            delivered.startsWindow = false
            let update = CollectionUpdate(change: change, items: update.items)
            delivered.last = update
            await deliver(LiveCollectionSnapshot(update, as: Model.self))
            return !once
        } lost: { delivered in
            delivered.startsWindow = true
            guard let seen = delivered.last, seen.change.loadingStatus != .loading else { return }
            let notice = seen.unchanged(loadingStatus: .loading)
            delivered.last = notice
            await deliver(LiveCollectionSnapshot(notice, as: Model.self))
        } refused: { delivered, error in
            guard let seen = delivered.last else { return }
            let failure = RPCError(code: error.code ?? .internalError, message: error.message)
            await deliver(LiveCollectionSnapshot(seen.unchanged(loadingStatus: .error, error: failure), as: Model.self))
        }
        return LiveCollectionObservation(notificationToken: token, pages: pages)
    }
}

extension CollectionUpdate {
    /// The same window with no change and another loading status (the connection was lost, the daemon
    /// refused the observation when it was made again).
    func unchanged(loadingStatus: LoadingStatus, error: RPCError? = nil) -> CollectionUpdate {
        var notice = change
        notice.changes = ChangeSet()
        notice.items = [:]
        notice.reset = nil
        notice.resync = nil
        notice.loadingStatus = loadingStatus
        notice.error = error
        return CollectionUpdate(change: notice, items: items)
    }
}

/// The page moves an observation made since its window's first page, to make again after a reconnection.
final class PageMoves: Sendable {
    enum Move: Sendable {
        case next, previous

        /// Moves `token`'s window on `connection`; false when there was no such page.
        func perform(on connection: LiveGateConnection, token: Int64) async throws -> Bool {
            switch self {
            case .next: try await connection.nextPage(token: token)
            case .previous: try await connection.previousPage(token: token)
            }
        }
    }

    private let state = Mutex<[Move]>([])

    var moves: [Move] { state.withLock { $0 } }
    func record(_ move: Move) { state.withLock { $0.append(move) } }
    func reset() { state.withLock { $0.removeAll() } }
}

/// A typed collection observation: its token, and the paging of its window.
public struct LiveCollectionObservation: Sendable {
    /// Ends the observation when invalidated or released.
    public let notificationToken: NotificationToken
    let pages: PageMoves

    /// One more page at the end of the window; `false` when there is none. The new items arrive through the handler.
    @discardableResult
    public func nextPage() async throws -> Bool { try await move(.next) }
    /// One more page at the start (for windows anchored at the last page); `false` when there is none.
    @discardableResult
    public func previousPage() async throws -> Bool { try await move(.previous) }
    /// Back to one page.
    @discardableResult
    public func resetPage() async throws -> Bool {
        let (connection, token) = try bound()
        let moved = try await connection.resetPage(token: token)
        if moved { pages.reset() }
        return moved
    }
    /// Objects of the window by index, `limit` from `offset`, as the daemon holds them now (windowed reads).
    public func objects(offset: Int, limit: Int) async throws -> [ObjectSnapshot] {
        let (connection, token) = try bound()
        return try await connection.items(token: token, offset: offset, limit: limit).items
    }

    /// Objects of the query's whole result by index (beyond the window), `limit` (1-1000) from `offset`, read
    /// from the daemon's cache: neither the daemon nor this process holds the result in memory.
    public func resultObjects(offset: Int, limit: Int) async throws -> [ObjectSnapshot] {
        let (connection, token) = try bound()
        return try await connection.items(token: token, offset: offset, limit: limit, from: .result).items
    }

    /// The object at `index` of the query's whole result (`nil` past its end), read as ``resultObjects(offset:limit:)``.
    public func object(at index: Int) async throws -> ObjectSnapshot? {
        try await resultObjects(offset: index, limit: 1).first
    }

    public func invalidate() { notificationToken.invalidate() }

    private func move(_ move: PageMoves.Move) async throws -> Bool {
        let (connection, token) = try bound()
        let moved = try await move.perform(on: connection, token: token)
        if moved { pages.record(move) }
        return moved
    }

    private func bound() throws -> (LiveGateConnection, Int64) {
        guard let bound = notificationToken.bound else { throw LiveGateError.connection("the observation has ended") }
        return (bound.connection, bound.token)
    }
}

extension LiveGateConnection {
    /// A typed live query: the collection's objects matching `where`, in `sort` order, in pages of
    /// `pageSize`. Its observations end with this connection.
    public func collection<Model: Decodable & Sendable>(
        _ collection: String,
        where filters: [String: JSONValue]? = nil,
        sort: SortParams? = nil,
        pageSize: Int? = nil,
        as type: Model.Type = Model.self
    ) -> LiveCollection<Model> {
        LiveCollection(source: .connection(self), collection: collection, query: QueryParams(filters, sort), pageSize: pageSize)
    }
}

extension LiveGateClient {
    /// A typed live query whose observations outlive the daemon's restarts (see ``LiveCollection``).
    public func collection<Model: Decodable & Sendable>(
        _ collection: String,
        where filters: [String: JSONValue]? = nil,
        sort: SortParams? = nil,
        pageSize: Int? = nil,
        as type: Model.Type = Model.self
    ) -> LiveCollection<Model> {
        LiveCollection(source: .client(self), collection: collection, query: QueryParams(filters, sort), pageSize: pageSize)
    }
}

extension QueryParams {
    /// The query of `filters` and `sort`; `nil` (the whole collection by id) when both are.
    init?(_ filters: [String: JSONValue]?, _ sort: SortParams?) {
        guard filters != nil || sort != nil else { return nil }
        self.init(where: filters, sort: sort)
    }
}
