// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON
import NIOCore
import NIOPosix
import Synchronization

/// One connection to `livegated`.
///
/// ```swift
/// try await LiveGateConnection.withConnection(client: "my-app") { daemon in
///     let observation = try await daemon.observeObject(collection: "notes", id: "n1")
///     for try await change in observation.changes { print(change.snapshot?.data ?? "gone") }
/// }
/// ```
///
/// Requests may be sent from several tasks at once; each token's notifications arrive in order on its
/// own ``ObjectObservation``.
public final class LiveGateConnection: Sendable {
    enum Pending: Sendable {
        case plain(ResponseSlot<JSONValue>)
        case observe(ResponseSlot<ObjectObservation>)
        case observeCollection(ResponseSlot<CollectionObservation>)
        case listen(ResponseSlot<StreamListening>)
        case feed(ResponseSlot<CollectionFeed>)
    }

    /// A collection token's stream and the window as the notifications so far make it.
    private struct CollectionMirror {
        let sink: AsyncThrowingStream<CollectionUpdate, any Error>.Continuation
        var items: [ObjectSnapshot] = []
    }

    private struct State {
        var nextID: Int64 = 0
        var pending: [Int64: Pending] = [:]
        var observations: [Int64: AsyncThrowingStream<ObjectChangedParams, any Error>.Continuation] = [:]
        var collections: [Int64: CollectionMirror] = [:]
        var streams: [Int64: AsyncThrowingStream<StreamEvent, any Error>.Continuation] = [:]
        var feeds: [Int64: AsyncThrowingStream<FeedEventBody, any Error>.Continuation] = [:]
        var closedReason: LiveGateError?
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let channel: any Channel
    private let state = Mutex(State())
    /// The daemon's `hello` answer.
    public let hello: HelloResult

    private init(outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, channel: any Channel, hello: HelloResult) {
        self.outbound = outbound
        self.channel = channel
        self.hello = hello
    }

    /// Closes the connection (the daemon then ends its tokens); requests waiting for an answer fail.
    public func close() {
        channel.close(promise: nil)
    }

    /// The socket used when none is given: `$LIVEGATE_SOCKET`, else the system daemon's
    /// `/run/livegate/livegate.sock` (``DaemonSocket``: the daemon follows the same rule).
    public static var defaultSocketPath: String {
        DaemonSocket.defaultPath(environment: ProcessInfo.processInfo.environment)
    }

    /// Connects, says hello, runs `body`, then closes the connection.
    /// - Throws: ``LiveGateError`` when the daemon cannot be reached or refuses the protocol version.
    public static func withConnection<Result: Sendable>(
        socketPath: String = LiveGateConnection.defaultSocketPath,
        client: String,
        _ body: (LiveGateConnection) async throws -> Result
    ) async throws -> Result {
        let channel: NIOAsyncChannel<InboundFrame, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(unixDomainSocketPath: socketPath) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            ByteToMessageHandler(JSONLineFrameDecoder(maxFrameBytes: 64 << 20))
                        )
                        return try NIOAsyncChannel(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(inboundType: InboundFrame.self, outboundType: ByteBuffer.self)
                        )
                    }
                }
        } catch {
            throw LiveGateError.connection("cannot connect to livegated at \(socketPath): \(error)")
        }
        return try await channel.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Void.self) { group in
                let (helloStream, helloSink) = AsyncStream.makeStream(of: LiveGateConnection.self)
                let reader = Reader()
                group.addTask {
                    await reader.run(inbound: inbound, outbound: outbound, channel: channel.channel, client: client, ready: helloSink)
                }
                var iterator = helloStream.makeAsyncIterator()
                guard let connection = await iterator.next() else {
                    throw reader.failure ?? LiveGateError.connection("livegated closed the connection before answering hello")
                }
                defer { channel.channel.close(promise: nil) }
                return try await body(connection)
            }
        }
    }

    /// Reads the connection: performs the hello, then routes responses and notifications.
    private final class Reader: Sendable {
        static func closingParams(_ message: RPCIncomingMessage) throws -> ConnectionClosingParams {
            try JSONValueDecoder.decode(ConnectionClosingParams.self, from: message.params ?? .null)
        }

        private let failureBox = Mutex<LiveGateError?>(nil)
        var failure: LiveGateError? { failureBox.withLock { $0 } }

        func run(
            inbound: NIOAsyncChannelInboundStream<InboundFrame>,
            outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
            channel: any Channel,
            client: String,
            ready: AsyncStream<LiveGateConnection>.Continuation
        ) async {
            defer { ready.finish() }
            var connection: LiveGateConnection?
            do {
                let request = RPCRequest(id: .number(0), method: Method.hello, params: HelloParams(client: client))
                // A daemon that refuses this client says why (connection.closing) and closes, maybe before the
                // hello is written: then what it said is still to be read, and explains the failed write.
                var helloFailure: (any Error)?
                do {
                    try await outbound.write(try WireJSON.line(request))
                } catch {
                    helloFailure = error
                }
                for try await frame in inbound {
                    guard case .message(let buffer) = frame else { continue }
                    let message = try JSONValueDecoder.decode(RPCIncomingMessage.self, from: JSONValue(parsing: buffer.readableBytesView))
                    if let connection {
                        connection.route(message, raw: buffer)
                        continue
                    }
                    // The first answer is hello's, unless the daemon refuses the connection (access policy,
                    // connection limit): then it says why in connection.closing, and closes.
                    if message.method == NotificationMethod.connectionClosing {
                        throw LiveGateError.closing(try Self.closingParams(message), beforeHello: true)
                    }
                    if message.method != nil { continue }
                    if let error = message.error { throw LiveGateError(error) }
                    let hello = try JSONValueDecoder.decode(HelloResult.self, from: message.result ?? .null)
                    let established = LiveGateConnection(outbound: outbound, channel: channel, hello: hello)
                    connection = established
                    ready.yield(established)
                }
                if let helloFailure, connection == nil { throw helloFailure }
                connection?.closed(LiveGateError.connection("livegated closed the connection"))
            } catch let error as LiveGateError {
                failureBox.withLock { $0 = error }
                connection?.closed(error)
            } catch {
                let failure = LiveGateError.connection("the connection to livegated failed: \(error)")
                failureBox.withLock { $0 = failure }
                connection?.closed(failure)
            }
        }
    }

    // MARK: Requests

    /// Sends `method` with `params` and decodes its result as `Result`.
    public func request<Params: Encodable & Sendable, Result: Decodable>(
        _ method: String,
        _ params: Params,
        as: Result.Type = Result.self
    ) async throws -> Result {
        let value = try await send(method, params)
        do {
            return try JSONValueDecoder.decode(Result.self, from: value)
        } catch {
            throw LiveGateError.connection("livegated's answer to \(method) was not understood: \(error)")
        }
    }

    /// Observes an object. Its ``ObjectObservation/changes`` deliver every `object.changed` of the new token.
    public func observeObject(
        collection: String,
        id: String,
        policy: ObservePolicy? = nil,
        once: Bool = false,
        sinceVersion: Int64? = nil,
        fields: [String]? = nil
    ) async throws -> ObjectObservation {
        let params = ObjectObserveParams(
            collection: collection,
            id: id,
            once: once ? true : nil,
            policy: policy,
            sinceVersion: sinceVersion,
            fields: fields
        )
        return try await sendObserve(Method.objectObserve, params)
    }

    /// Ends a token; its observation's `changes` finish.
    public func invalidate(token: Int64) async throws {
        _ = try await request(Method.tokenInvalidate, TokenParams(token: token), as: InvalidateResult.self)
        let (sink, collection, stream, feed) = state.withLock {
            (
                $0.observations.removeValue(forKey: token), $0.collections.removeValue(forKey: token),
                $0.streams.removeValue(forKey: token), $0.feeds.removeValue(forKey: token)
            )
        }
        sink?.finish()
        collection?.sink.finish()
        stream?.finish()
        feed?.finish()
    }

    /// Observes a query's result in pages. The observation's `updates` carry each notification with the
    /// window it leads to (this library applies every change set to the window it holds, and ends the
    /// stream with an error if one ever does not fit). `pages`: the window starts with that many pages.
    public func observeCollection(
        collection: String,
        query: QueryParams? = nil,
        pageSize: Int? = nil,
        anchor: CollectionAnchorParam? = nil,
        once: Bool = false,
        pages: Int? = nil
    ) async throws -> CollectionObservation {
        let params = CollectionObserveParams(
            collection: collection,
            query: query,
            pageSize: pageSize,
            anchor: anchor,
            once: once ? true : nil,
            pages: pages
        )
        let slot = ResponseSlot<CollectionObservation>()
        try await send(Method.collectionObserve, params, .observeCollection(slot))
        return try await slot.value()
    }

    /// Extends a collection token's window by a page towards the end; false when there is no next page.
    public func nextPage(token: Int64) async throws -> Bool {
        try await request(Method.collectionNextPage, TokenParams(token: token), as: PageResult.self).moved
    }

    /// Extends a `last`-anchored window by a page towards the start; false when there is no previous page.
    public func previousPage(token: Int64) async throws -> Bool {
        try await request(Method.collectionPreviousPage, TokenParams(token: token), as: PageResult.self).moved
    }

    /// Takes the window back to one page; false when it holds one page already.
    public func resetPage(token: Int64) async throws -> Bool {
        try await request(Method.collectionResetPage, TokenParams(token: token), as: PageResult.self).moved
    }

    /// Reads `limit` items from `offset` of the token's window as the daemon holds it now, or (`from:
    /// .result`) of the query's whole result, read by index from the daemon's cache.
    public func items(
        token: Int64,
        offset: Int,
        limit: Int,
        from source: CollectionItemsParams.Source = .window
    ) async throws -> CollectionItemsResult {
        try await request(
            Method.collectionItems,
            CollectionItemsParams(token: token, offset: offset, limit: limit, from: source == .window ? nil : source)
        )
    }

    /// Replaces an object's data (creating it if needed), or with `merge` merges a JSON merge patch into it;
    /// optionally only at version `ifVersion`.
    public func update(
        collection: String,
        id: String,
        data: JSONValue,
        ifVersion: Int64? = nil,
        merge: Bool = false
    ) async throws -> ObjectSnapshot {
        let params = ObjectWriteParams(collection: collection, id: id, data: data, ifVersion: ifVersion, merge: merge ? true : nil)
        return try await request(Method.objectUpdate, params, as: ObjectWriteResult.self).snapshot
    }

    /// Deletes an object; returns the version of the deletion.
    @discardableResult
    public func delete(collection: String, id: String, ifVersion: Int64? = nil) async throws -> Int64 {
        let params = ObjectDeleteParams(collection: collection, id: id, ifVersion: ifVersion)
        return try await request(Method.objectDelete, params, as: ObjectDeleteResult.self).version
    }

    /// Queues a write in the daemon's durable outbox and returns at once (`wait: false`): the daemon sends
    /// it, in order, through outages and restarts, until the cloud confirms or rejects it. Observers of the
    /// object see it at once with `pendingWrites: true`, then the cloud's version, or (rejected) the
    /// confirmed data back with the error.
    public func queueUpdate(collection: String, id: String, data: JSONValue, ifVersion: Int64? = nil, merge: Bool = false) async throws {
        let params = ObjectWriteParams(collection: collection, id: id, data: data, ifVersion: ifVersion, merge: merge ? true : nil, wait: false)
        _ = try await request(Method.objectUpdate, params, as: ObjectQueuedResult.self)
    }

    /// Queues a deletion (see ``queueUpdate(collection:id:data:ifVersion:merge:)``).
    public func queueDelete(collection: String, id: String, ifVersion: Int64? = nil) async throws {
        let params = ObjectDeleteParams(collection: collection, id: id, ifVersion: ifVersion, wait: false)
        _ = try await request(Method.objectDelete, params, as: ObjectQueuedResult.self)
    }

    /// Creates an object; fails with `versionConflict` when it exists.
    public func create(collection: String, id: String, data: JSONValue) async throws -> ObjectSnapshot {
        let params = ObjectWriteParams(collection: collection, id: id, data: data)
        return try await request(Method.objectCreate, params, as: ObjectWriteResult.self).snapshot
    }

    /// The daemon's figures (`daemon.stats`).
    public func stats() async throws -> DaemonStats {
        try await request(Method.daemonStats, [String: Int](), as: DaemonStats.self)
    }

    /// Every open connection (`daemon.clients`; administrators only: `notPermitted` otherwise).
    public func clients() async throws -> [ClientInfo] {
        try await request(Method.daemonClients, [String: Int](), as: DaemonClientsResult.self).clients
    }

    /// Sets the daemon's log level until its next reload or restart (`daemon.setLogLevel`; administrators only).
    public func setLogLevel(_ level: String) async throws -> SetLogLevelResult {
        try await request(Method.daemonSetLogLevel, SetLogLevelParams(level: level), as: SetLogLevelResult.self)
    }

    private func sendObserve(_ method: String, _ params: some Encodable & Sendable) async throws -> ObjectObservation {
        let slot = ResponseSlot<ObjectObservation>()
        try await send(method, params, .observe(slot))
        return try await slot.value()
    }

    private func send(_ method: String, _ params: some Encodable & Sendable) async throws -> JSONValue {
        let slot = ResponseSlot<JSONValue>()
        try await send(method, params, .plain(slot))
        return try await slot.value()
    }

    /// Registers the request (so its answer has a place to go), then writes it.
    func send(_ method: String, _ params: some Encodable & Sendable, _ pending: Pending) async throws {
        let id = try state.withLock { state throws(LiveGateError) -> Int64 in
            if let reason = state.closedReason { throw reason }
            state.nextID += 1
            state.pending[state.nextID] = pending
            return state.nextID
        }
        do {
            try await outbound.write(try WireJSON.line(RPCRequest(id: .number(id), method: method, params: params)))
        } catch {
            _ = state.withLock { $0.pending.removeValue(forKey: id) }
            throw LiveGateError.connection("sending \(method) to livegated failed: \(error)")
        }
    }

    private static func fail(_ pending: Pending, _ error: any Error) {
        switch pending {
        case .plain(let slot): slot.fill(.failure(error))
        case .observe(let slot): slot.fill(.failure(error))
        case .observeCollection(let slot): slot.fill(.failure(error))
        case .listen(let slot): slot.fill(.failure(error))
        case .feed(let slot): slot.fill(.failure(error))
        }
    }

    // MARK: Routing

    private func route(_ message: RPCIncomingMessage, raw: ByteBuffer) {
        if let method = message.method {
            if method == NotificationMethod.collectionChanged {
                routeCollectionChange(raw)
                return
            }
            if method == NotificationMethod.feedEvent {
                routeFeedEvent(message.params)
                return
            }
            if method == NotificationMethod.streamMessage || method == NotificationMethod.streamNotice {
                routeStreamEvent(method, message.params)
                return
            }
            guard method == NotificationMethod.objectChanged else {
                if method == NotificationMethod.connectionClosing, let params = try? Reader.closingParams(message) {
                    closed(LiveGateError.closing(params, beforeHello: false))
                }
                return
            }
            struct Notification: Decodable { var params: ObjectChangedParams }
            guard let change = try? JSONValueDecoder.decode(Notification.self, from: JSONValue(parsing: raw.readableBytesView)).params else { return }
            let sink = state.withLock { $0.observations[change.token] }
            sink?.yield(change)
            return
        }
        guard case .number(let id) = message.id else { return }
        guard let pending = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return }
        if let error = message.error {
            Self.fail(pending, LiveGateError(error))
            return
        }
        switch pending {
        case .plain(let slot):
            slot.fill(.success(message.result ?? .null))
        case .observe(let slot):
            guard let token = Self.token(in: message, failing: slot) else { return }
            // Registered here, in the reader, so no notification of the token can arrive before its stream exists.
            let (changes, sink) = AsyncThrowingStream.makeStream(of: ObjectChangedParams.self)
            state.withLock { $0.observations[token] = sink }
            slot.fill(.success(ObjectObservation(token: token, changes: changes)))
        case .observeCollection(let slot):
            guard let token = Self.token(in: message, failing: slot) else { return }
            let (updates, sink) = AsyncThrowingStream.makeStream(of: CollectionUpdate.self)
            state.withLock { $0.collections[token] = CollectionMirror(sink: sink) }
            slot.fill(.success(CollectionObservation(token: token, updates: updates)))
        case .listen(let slot):
            guard let token = Self.token(in: message, failing: slot) else { return }
            let (events, sink) = AsyncThrowingStream.makeStream(of: StreamEvent.self)
            state.withLock { $0.streams[token] = sink }
            slot.fill(.success(StreamListening(token: token, events: events)))
        case .feed(let slot):
            guard let token = Self.token(in: message, failing: slot) else { return }
            let (events, sink) = AsyncThrowingStream.makeStream(of: FeedEventBody.self)
            state.withLock { $0.feeds[token] = sink }
            slot.fill(.success(CollectionFeed(token: token, events: events)))
        }
    }

    private func routeFeedEvent(_ params: JSONValue?) {
        guard let params, let token = params["token"]?.int64Value,
            let sink = state.withLock({ $0.feeds[token] }),
            let event = try? JSONValueDecoder.decode(FeedEventBody.self, from: params)
        else { return }
        sink.yield(event)
    }

    private func routeStreamEvent(_ method: String, _ params: JSONValue?) {
        guard let params, let token = params["token"]?.int64Value,
            let sink = state.withLock({ $0.streams[token] })
        else { return }
        if method == NotificationMethod.streamMessage {
            guard let body = try? JSONValueDecoder.decode(StreamMessageBody.self, from: params) else { return }
            sink.yield(.message(body))
        } else if let notice = try? JSONValueDecoder.decode(StreamNoticeBody.self, from: params) {
            if let error = notice.error { sink.yield(.error(LiveGateError(error))) }
            if notice.resync == true { sink.yield(.resync) }
        }
    }

    /// The token an observe's answer carries; `nil` (and `slot` failed) when it carries none.
    private static func token<T>(in message: RPCIncomingMessage, failing slot: ResponseSlot<T>) -> Int64? {
        guard let token = message.result?["token"]?.int64Value else {
            slot.fill(.failure(LiveGateError.connection("livegated answered an observe without a token")))
            return nil
        }
        return token
    }

    private func routeCollectionChange(_ raw: ByteBuffer) {
        struct Notification: Decodable { var params: CollectionChangedParams }
        guard let change = try? JSONValueDecoder.decode(Notification.self, from: JSONValue(parsing: raw.readableBytesView)).params else { return }
        let delivery = state.withLock { state -> (AsyncThrowingStream<CollectionUpdate, any Error>.Continuation, CollectionUpdate?)? in
            guard var mirror = state.collections[change.token] else { return nil }
            guard let items = change.apply(to: mirror.items) else {
                state.collections[change.token] = nil
                return (mirror.sink, nil)
            }
            mirror.items = items
            state.collections[change.token] = mirror
            return (mirror.sink, CollectionUpdate(change: change, items: items))
        }
        guard let (sink, update) = delivery else { return }
        if let update {
            sink.yield(update)
        } else {
            sink.finish(throwing: LiveGateError.connection("a collection.changed notification did not fit the window held for token \(change.token)"))
        }
    }

    /// Whether the connection has closed.
    public var isClosed: Bool { state.withLock { $0.closedReason != nil } }

    /// Returns once the connection has closed (the daemon went away, or it was closed here).
    public func waitUntilClosed() async {
        await withCheckedContinuation { waiter in
            let closed = state.withLock { state in
                if state.closedReason == nil { state.closeWaiters.append(waiter) }
                return state.closedReason != nil
            }
            if closed { waiter.resume() }
        }
    }

    private func closed(_ reason: LiveGateError) {
        let (pending, sinks, waiters) = state.withLock { state in
            if state.closedReason == nil { state.closedReason = reason }
            defer {
                state.closeWaiters.removeAll()
                state.pending.removeAll()
                state.observations.removeAll()
                state.collections.removeAll()
                state.streams.removeAll()
                state.feeds.removeAll()
            }
            for mirror in state.collections.values { mirror.sink.finish(throwing: reason) }
            for sink in state.streams.values { sink.finish(throwing: reason) }
            for sink in state.feeds.values { sink.finish(throwing: reason) }
            return (Array(state.pending.values), Array(state.observations.values), state.closeWaiters)
        }
        for request in pending { Self.fail(request, reason) }
        for sink in sinks { sink.finish(throwing: reason) }
        for waiter in waiters { waiter.resume() }
    }
}

/// One object observation: its token, and its changes in order.
public struct ObjectObservation: Sendable {
    public let token: Int64
    /// Every `object.changed` of the token. Finishes when the token is invalidated, fires its once, or
    /// (throwing ``LiveGateError``) when the connection closes.
    public let changes: AsyncThrowingStream<ObjectChangedParams, any Error>
}

/// A collection observation: its token and its updates, until the token is invalidated or the connection ends.
public struct CollectionObservation: Sendable {
    public let token: Int64
    public let updates: AsyncThrowingStream<CollectionUpdate, any Error>
}

/// One `collection.changed` notification and the window it leads to.
public struct CollectionUpdate: Sendable {
    public let change: CollectionChangedParams
    /// The token's window after the change, in order.
    public let items: [ObjectSnapshot]
}
