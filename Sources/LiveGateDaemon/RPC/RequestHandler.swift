// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateProtocol
import LiveGateVersion
import LiveJSON
import LiveSDK
import Logging
import NIOCore
import NIOPosix

/// Decodes one request frame and performs it. Every failure becomes a JSON-RPC error on the same
/// connection, which stays usable.
struct RequestHandler {
    let connection: ClientConnection
    private var context: DaemonContext { connection.context }

    static func unknownToken(_ token: Int64) -> RPCError {
        RPCError(
            code: .unknownToken,
            message: "this connection has no token \(token) (it may have ended already, or belong to another connection)"
        )
    }

    static let methods = [
        Method.hello, Method.objectObserve, Method.tokenInvalidate, Method.objectCreate, Method.objectUpdate, Method.objectDelete,
        Method.collectionObserve, Method.collectionNextPage, Method.collectionPreviousPage, Method.collectionResetPage,
        Method.collectionItems, Method.feedSubscribe, Method.sessionState, Method.daemonStats, Method.daemonClients,
        Method.daemonSetLogLevel, Method.streamSend, Method.streamPost, Method.streamListen,
        Method.streamFollow, Method.streamGrantAccess, Method.streamAccess,
    ]

    /// Methods for administrators only (root, the daemon's user, `admin-users`, `admin-groups`).
    static let administrativeMethods: Set<String> = [Method.daemonClients, Method.daemonSetLogLevel]

    /// Methods that change something in the cloud: refused to read-only clients.
    static let writingMethods: Set<String> = [
        Method.objectCreate, Method.objectUpdate, Method.objectDelete, Method.streamSend, Method.streamPost, Method.streamGrantAccess,
    ]

    /// Performs the frame's request, or each request of its batch (a JSON array: their answers go out together,
    /// as one array, in the batch's order; a batch of notifications only gets no answer).
    func handle(_ frame: ByteBuffer) async {
        // The common request of a burst (a list opened at once), read without a tree; the rest the general way.
        if let request = frame.readableBytesView.withUnsafeBytes({ ObjectObserveRequest(frame: $0) }) {
            await perform(request.id, method: Method.objectObserve) { try await observe(request.id, request.params) }
            return
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: frame.readableBytesView)
        } catch {
            if error.isDepthLimit {
                connection.respond(
                    error: RPCError(
                        code: .limitExceeded,
                        message: "the frame nests arrays and objects deeper than \(RequestLimits.maxJSONDepth) levels",
                        data: ["limit": "maxJSONDepth", "maxJSONDepth": .integer(RequestLimits.maxJSONDepth)]
                    ),
                    id: .null
                )
            } else if error.isNumberLimit {
                // Valid JSON, but a number this daemon will not keep (it keeps every number exactly).
                connection.respond(
                    error: RPCError(
                        code: .limitExceeded,
                        message:
                            "the frame holds a number longer than \(JSONNumber.maxTextLength) characters written out without an exponent (at byte \(error.offset))",
                        data: ["limit": "maxNumberLength", "maxNumberLength": .integer(JSONNumber.maxTextLength)]
                    ),
                    id: .null
                )
            } else {
                connection.respond(
                    error: RPCError(code: .parseError, message: "the frame is not valid JSON (\(error)); send one JSON-RPC request per line"),
                    id: .null
                )
            }
            return
        }
        guard case .array(let members) = value else {
            await perform(value)
            return
        }
        guard !members.isEmpty else {
            connection.respond(error: RPCError(code: .invalidRequest, message: "an empty batch: send at least one request in it"), id: .null)
            return
        }
        guard members.count <= RequestLimits.maxBatchRequests else {
            connection.respond(
                error: RPCError(
                    code: .limitExceeded,
                    message: "a batch of \(members.count) requests exceeds the limit of \(RequestLimits.maxBatchRequests); split it",
                    data: ["limit": "maxBatchRequests", "maxBatchRequests": .integer(RequestLimits.maxBatchRequests)]
                ),
                id: .null
            )
            return
        }
        await connection.answeringAsOne {
            for member in members { await perform(member) }
        }
    }

    /// Checks one request and performs it; every failure is answered under the request's id.
    private func perform(_ value: JSONValue) async {
        let envelope: RPCRequestEnvelope
        switch RPCRequestEnvelope.read(value) {
        case .success(let read): envelope = read
        case .failure(let rejected):
            connection.respond(error: rejected.error, id: rejected.id)
            return
        }
        let method = envelope.method
        // Requests without an id are notifications: JSON-RPC gives them no answer, and the daemon takes none.
        guard let id = envelope.id else { return }
        await perform(id, method: method) {
            switch method {
            case Method.hello: try await hello(id, envelope.params)
            case Method.objectObserve: try await observe(id, envelope.params)
            case Method.tokenInvalidate: try invalidate(id, envelope.params)
            case Method.objectCreate: try await write(id, envelope.params, create: true)
            case Method.objectUpdate: try await write(id, envelope.params, create: false)
            case Method.objectDelete: try await delete(id, envelope.params)
            case Method.collectionObserve: try await observeCollection(id, envelope.params)
            case Method.collectionNextPage: try await page(id, envelope.params, .next, method: method)
            case Method.collectionPreviousPage: try await page(id, envelope.params, .previous, method: method)
            case Method.collectionResetPage: try await page(id, envelope.params, .reset, method: method)
            case Method.collectionItems: try await items(id, envelope.params)
            case Method.sessionState: try sessionState(id, envelope.params)
            case Method.daemonStats: await daemonStats(id)
            case Method.daemonClients: daemonClients(id)
            case Method.daemonSetLogLevel: try setLogLevel(id, envelope.params)
            case Method.feedSubscribe: try await feedSubscribe(id, envelope.params)
            case Method.streamSend: try await streamSend(id, envelope.params)
            case Method.streamPost: try await streamPost(id, envelope.params)
            case Method.streamListen: try await streamListen(id, envelope.params, follow: false)
            case Method.streamFollow: try await streamListen(id, envelope.params, follow: true)
            case Method.streamGrantAccess: try await streamAccess(id, envelope.params, grant: true)
            case Method.streamAccess: try await streamAccess(id, envelope.params, grant: false)
            case "debug.wedgeEventLoop" where context.configuration.testHooks: try wedge(id, envelope.params)
            default:
                throw RPCError(
                    code: .methodNotFound,
                    message: "unknown method \"\(method)\"; this daemon speaks \(Self.methods.joined(separator: ", "))"
                )
            }
        }
    }

    /// Performs a request with an id (`body`), within the connection's rate and its client's rights; every
    /// failure is answered under `id`.
    private func perform(_ id: RequestID, method: String, _ body: () async throws -> Void) async {
        guard connection.admitRequest() else {
            connection.respond(
                error: RPCError(
                    code: .limitExceeded,
                    message: "more than \(connection.requestsPerSecond) requests per second on this connection; slow down",
                    data: ["limit": "maxRequestsPerSecond"]
                ),
                id: id
            )
            return
        }
        do {
            if Self.writingMethods.contains(method), connection.isReadOnly {
                throw RPCError(
                    code: .notPermitted,
                    message: "not permitted: this client may only read (observe, listen), by the daemon's access policy"
                )
            }
            if Self.administrativeMethods.contains(method), !connection.mayAdminister {
                throw RPCError(
                    code: .notPermitted,
                    message:
                        "not permitted: \(method) is for administrators (root, the daemon's user, or admin-users / admin-groups in its configuration); run it with sudo"
                )
            }
            try await body()
        } catch let error as RPCError {
            connection.respond(error: error, id: id)
        } catch let error as LiveError {
            connection.respond(error: RPCError(error), id: id)
        } catch {
            connection.logger.error("request failed", metadata: ["method": "\(method)", "error": "\(error)"])
            connection.respond(error: RPCError(code: .internalError, message: "the daemon failed internally; see its log"), id: id)
        }
    }

    // MARK: Methods

    private func hello(_ id: RequestID, _ params: JSONValue?) async throws {
        let hello = try Self.decode(HelloParams.self, params, method: Method.hello)
        guard hello.protocol == livegateProtocolVersion else {
            throw RPCError(
                code: .unsupportedProtocol,
                message: "this daemon speaks protocol \(livegateProtocolVersion), not \(hello.protocol)",
                data: ["supported": [.integer(livegateProtocolVersion)]]
            )
        }
        connection.name = hello.client
        connection.logger.debug("hello", metadata: ["client": "\(hello.client)"])
        let result = HelloResult(
            daemon: "livegated",
            version: LiveGateVersion.current,
            protocol: livegateProtocolVersion,
            session: await context.engine.session.state.rawValue,
            limits: .init(maxFrameBytes: connection.maxFrameBytes)
        )
        connection.respond(result: result, id: id)
    }

    private func observe(_ id: RequestID, _ params: JSONValue?) async throws {
        try await observe(id, ObjectObserveParams(reading: params) ?? Self.decode(ObjectObserveParams.self, params, method: Method.objectObserve))
    }

    private func observe(_ id: RequestID, _ observe: ObjectObserveParams) async throws {
        let key = try Self.key(observe.collection, observe.id)
        if let fields = observe.fields, fields.isEmpty || !fields.allSatisfy(CollectionQuery.isValidField) {
            throw RPCError(
                code: .invalidParams,
                message: "params.fields must name 1 or more top-level fields (1-64 characters of A-Z a-z 0-9 _, not starting with a digit)"
            )
        }
        let options = ObserveOptions(
            policy: observe.policy == .freshOnly ? .freshOnly : .localThenFresh,
            once: observe.once ?? false
        )
        try checkTokenLimit()
        try await checkReadable(key.collection)
        let token = connection.allocateToken()
        // The answer is queued by the token's join, in the same task on the connection's loop, first: it
        // precedes the token's first notification, and follows the answers before it.
        let answer = connection.tokenAnswer(token, id: id)
        let connection = self.connection
        let subscription = await context.hub.subscribe(
            key: key,
            options: options,
            sinceVersion: observe.sinceVersion,
            fields: observe.fields.map(Set.init),
            outbox: connection.outbox,
            eventLoop: connection.eventLoop,
            token: token,
            prefix: connection.objectChangedPrefixes.prefix(token: token),
            answer: answer,
            onFinished: { connection.endToken(token) }
        )
        connection.tokenSubscribed(token, .object(subscription))
    }

    /// An observation the cloud would refuse (its permissions do not let the daemon's user read the
    /// collection) fails its request with `-32002` (see ``LiveClient/checkReadable(collection:)``).
    private func checkReadable(_ collection: String) async throws {
        do {
            try await context.engine.checkReadable(collection: collection)
        } catch {
            throw RPCError(error)
        }
    }

    private func observeCollection(_ id: RequestID, _ params: JSONValue?) async throws {
        let observe = try Self.decode(CollectionObserveParams.self, params, method: Method.collectionObserve)
        let query = CollectionQuery(
            collection: observe.collection,
            where: observe.query?.where ?? [:],
            sort: observe.query?.sort.map { QuerySort(field: $0.field, descending: $0.descending ?? false) }
        )
        if let problem = query.problem { throw RPCError(code: .invalidParams, message: "invalid params for collection.observe: \(problem)") }
        let pageSize = observe.pageSize ?? 20
        guard (1...100).contains(pageSize) else {
            throw RPCError(code: .invalidParams, message: "params.pageSize must be from 1 to 100, not \(pageSize)")
        }
        let pages = observe.pages ?? 1
        guard (1...1000).contains(pages) else {
            throw RPCError(code: .invalidParams, message: "params.pages must be from 1 to 1000, not \(pages)")
        }
        try checkTokenLimit()
        try await checkReadable(query.collection)
        let window = CollectionWindow(query: query, pageSize: pageSize, anchor: observe.anchor == .last ? .last : .first, pages: pages)
        let token = connection.allocateToken()
        // The answer is queued by the token's join, on the connection's loop: before its first notification.
        let answer = connection.tokenAnswer(token, id: id)
        let connection = self.connection
        let subscription = await context.collections.subscribe(
            window,
            once: observe.once ?? false,
            outbox: connection.outbox,
            eventLoop: connection.eventLoop,
            token: token,
            answer: answer,
            onFinished: { connection.endToken(token) }
        )
        connection.tokenSubscribed(token, .collection(subscription))
    }

    private func sessionState(_ id: RequestID, _ params: JSONValue?) throws {
        let request = try Self.decode(SessionStateParams.self, params, method: Method.sessionState)
        switch request.watch {
        case true?: context.sessionWatch.watch(connection.id, connection.outbox)
        case false?: context.sessionWatch.unwatch(connection.id)
        case nil: break
        }
        connection.respond(result: context.sessionWatch.current, id: id)
    }

    private func daemonStats(_ id: RequestID) async {
        let objects = context.hub.counts
        let pendingWrites = (try? await context.engine.pendingWriteCount()) ?? 0
        let stats = DaemonStats(
            version: LiveGateVersion.current,
            uptimeSeconds: Int((ContinuousClock.now - context.startedAt).components.seconds),
            connections: context.connections.count,
            tokens: context.connections.tokenCount,
            observedObjects: objects.topics,
            objectTokens: objects.tokens,
            collectionBodiesEncoded: context.collections.encodedBodies,
            streamBodiesEncoded: context.streams.encodedBodies,
            feedBodiesEncoded: context.feeds.encodedBodies,
            pendingWrites: pendingWrites,
            session: context.sessionWatch.current,
            quarantinedOutbox: QuarantinedOutbox.kept(by: context.engine)
        )
        connection.respond(result: stats, id: id)
    }

    private func daemonClients(_ id: RequestID) {
        connection.respond(result: DaemonClientsResult(clients: context.connections.all.map(\.info)), id: id)
    }

    private func setLogLevel(_ id: RequestID, _ params: JSONValue?) throws {
        let request = try Self.decode(SetLogLevelParams.self, params, method: Method.daemonSetLogLevel)
        guard let level = Logger.Level(rawValue: request.level) else {
            throw RPCError(
                code: .invalidParams,
                message: "params.level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not \(request.level)"
            )
        }
        let previous = context.settings.logLevel
        context.settings.logLevel = level
        // Logged at notice whatever the new level, so the change itself is always in the journal.
        connection.logger.notice(
            "log level changed at run time (until the next reload or restart)",
            metadata: ["logLevel": "\(level)", "previous": "\(previous)"]
        )
        connection.respond(result: SetLogLevelResult(level: level.rawValue, previous: previous.rawValue), id: id)
    }

    // MARK: Feeds

    private func feedSubscribe(_ id: RequestID, _ params: JSONValue?) async throws {
        let request = try Self.decode(FeedSubscribeParams.self, params, method: Method.feedSubscribe)
        guard EntityKey.isValidName(request.collection) else {
            throw RPCError(code: .invalidParams, message: "params.collection must be 1-128 characters of A-Z a-z 0-9 _ - .")
        }
        try await newsToken(id) { [context, connection] token throws(LiveError) in
            try await context.feeds.subscribe(
                collection: request.collection,
                outbox: connection.outbox,
                eventLoop: connection.eventLoop,
                token: token
            )
        }
    }

    /// A token whose subscription the cloud may refuse (streams, feeds): allocated first (its notifications
    /// are held on its share), answered once subscribed, given back when refused.
    private func newsToken(_ id: RequestID, _ subscribe: (Int64) async throws(LiveError) -> NewsSubscription) async throws {
        try checkTokenLimit()
        let token = connection.allocateToken()
        let subscription: NewsSubscription
        do {
            subscription = try await subscribe(token)
        } catch {
            connection.abandonToken(token)
            throw error
        }
        subscription.open(answer: connection.tokenAnswer(token, id: id))
        connection.tokenSubscribed(token, .news(subscription))
    }

    // MARK: Streams

    private func streamSend(_ id: RequestID, _ params: JSONValue?) async throws {
        let request = try Self.decode(StreamSendParams.self, params, method: Method.streamSend)
        try Self.checkStreamNames(request.stream, request.to)
        let sent = try await context.engine.stream(request.stream).send(to: request.to, request.message)
        connection.respond(result: StreamSendResult(sent), id: id)
    }

    private func streamPost(_ id: RequestID, _ params: JSONValue?) async throws {
        let request = try Self.decode(StreamPostParams.self, params, method: Method.streamPost)
        try Self.checkStreamNames(request.stream, nil)
        let sent = try await context.engine.stream(request.stream).post(request.message)
        connection.respond(result: StreamSendResult(sent), id: id)
    }

    private func streamListen(_ id: RequestID, _ params: JSONValue?, follow: Bool) async throws {
        let method = follow ? Method.streamFollow : Method.streamListen
        let request = try Self.decode(StreamListenParams.self, params, method: method)
        if follow && request.user == nil { throw RPCError(code: .invalidParams, message: "invalid params for \(method): params.user is missing") }
        if !follow && request.user != nil {
            throw RPCError(
                code: .invalidParams,
                message: "stream.listen hears the daemon user's own messages; use stream.follow to hear a user's posts"
            )
        }
        try Self.checkStreamNames(request.stream, request.user)
        try await newsToken(id) { [context, connection] token throws(LiveError) in
            try await context.streams.subscribe(
                stream: request.stream,
                user: request.user,
                outbox: connection.outbox,
                eventLoop: connection.eventLoop,
                token: token
            )
        }
    }

    private func streamAccess(_ id: RequestID, _ params: JSONValue?, grant: Bool) async throws {
        let method = grant ? Method.streamGrantAccess : Method.streamAccess
        let request = try Self.decode(StreamAccessParams.self, params, method: method)
        try Self.checkStreamNames(request.stream, request.user)
        let stream = context.engine.stream(request.stream)
        let acl: StreamACL
        if grant {
            guard let wanted = request.acl else {
                throw RPCError(code: .invalidParams, message: "invalid params for \(method): params.acl is missing")
            }
            acl = try await stream.grantAccess(to: request.user, StreamACL(publishers: wanted.publishers, subscribers: wanted.subscribers))
        } else {
            if request.acl != nil { throw RPCError(code: .invalidParams, message: "params.acl belongs to stream.grantAccess, not stream.access") }
            acl = try await stream.access(of: request.user)
        }
        connection.respond(result: StreamAccess(publishers: acl.publishers, subscribers: acl.subscribers), id: id)
    }

    private static func checkStreamNames(_ stream: String, _ user: String?) throws {
        guard EntityKey.isValidName(stream), user.map(EntityKey.isValidName) ?? true else {
            throw RPCError(code: .invalidParams, message: "params.stream and the user names must be 1-128 characters of A-Z a-z 0-9 _ - .")
        }
    }

    private enum PageMove { case next, previous, reset }

    private func page(_ id: RequestID, _ params: JSONValue?, _ move: PageMove, method: String) async throws {
        let request = try Self.decode(TokenParams.self, params, method: method)
        let sdkToken = try collectionToken(request.token)
        let moved: Bool
        switch move {
        case .next: moved = await sdkToken.nextPage()
        case .previous: moved = await sdkToken.previousPage()
        case .reset: moved = await sdkToken.resetPage()
        }
        connection.respond(result: PageResult(moved: moved), id: id)
    }

    private func items(_ id: RequestID, _ params: JSONValue?) async throws {
        let request = try Self.decode(CollectionItemsParams.self, params, method: Method.collectionItems)
        guard request.offset >= 0, (1...1000).contains(request.limit) else {
            throw RPCError(code: .invalidParams, message: "params.offset must be 0 or more and params.limit from 1 to 1000")
        }
        let token = try collectionToken(request.token)
        let result: CollectionItemsResult
        switch request.from ?? .window {
        case .window:
            let current = token.current
            let window = current.items.dropFirst(request.offset).prefix(request.limit)
            result = CollectionItemsResult(
                offset: request.offset,
                items: window.map(ObjectSnapshot.init),
                size: current.items.count,
                count: current.count
            )
        case .result:
            // Engine errors become their protocol form (a cloud that cannot be reached: -32004).
            // The items and the count from one state of the result, so they agree under concurrent changes.
            let (items, count) = try await token.objectsAndCount(in: request.offset..<(request.offset + request.limit))
            result = CollectionItemsResult(offset: request.offset, items: items.map(ObjectSnapshot.init), size: count, count: count)
        }
        connection.respond(result: result, id: id)
    }

    private func collectionToken(_ token: Int64) throws -> LiveCollectionToken {
        guard let subscription = connection.subscription(of: token) else { throw Self.unknownToken(token) }
        guard case .collection(let collection) = subscription else {
            throw RPCError(code: .invalidParams, message: "token \(token) does not observe a collection")
        }
        return collection.sdkToken
    }

    private func checkTokenLimit() throws {
        guard connection.tokenCount < connection.maxTokens else {
            throw RPCError(
                code: .limitExceeded,
                message: "this connection holds \(connection.maxTokens) tokens, its limit; invalidate some first",
                data: ["limit": "maxTokensPerConnection"]
            )
        }
    }

    private func invalidate(_ id: RequestID, _ params: JSONValue?) throws {
        let request = try Self.decode(TokenParams.self, params, method: Method.tokenInvalidate)
        guard connection.endToken(request.token) else { throw Self.unknownToken(request.token) }
        connection.respond(result: InvalidateResult(invalidated: true), id: id)
    }

    private func write(_ id: RequestID, _ params: JSONValue?, create: Bool) async throws {
        let method = create ? Method.objectCreate : Method.objectUpdate
        let request = try Self.decode(ObjectWriteParams.self, params, method: method)
        let key = try Self.key(request.collection, request.id)
        guard request.data.isObject else {
            throw RPCError(code: .invalidParams, message: "params.data must be a JSON object")
        }
        if create && request.merge == true {
            throw RPCError(code: .invalidParams, message: "params.merge applies to object.update only")
        }
        let change: LiveWrite = request.merge == true ? .merge(request.data) : .replace(request.data)
        let ifVersion = create ? 0 : request.ifVersion
        if request.wait == false {
            try await context.engine.enqueueWrite(collection: key.collection, id: key.id, change, ifVersion: ifVersion)
            connection.respond(result: ObjectQueuedResult(), id: id)
            return
        }
        let entity = try await context.engine.write(collection: key.collection, id: key.id, change, ifVersion: ifVersion)
        connection.respond(result: ObjectWriteResult(snapshot: ObjectSnapshot(entity)), id: id)
    }

    private func delete(_ id: RequestID, _ params: JSONValue?) async throws {
        let request = try Self.decode(ObjectDeleteParams.self, params, method: Method.objectDelete)
        let key = try Self.key(request.collection, request.id)
        if request.wait == false {
            try await context.engine.enqueueWrite(collection: key.collection, id: key.id, .delete, ifVersion: request.ifVersion)
            connection.respond(result: ObjectQueuedResult(), id: id)
            return
        }
        let tombstone = try await context.engine.write(collection: key.collection, id: key.id, .delete, ifVersion: request.ifVersion)
        connection.respond(result: ObjectDeleteResult(deleted: true, version: tombstone.version), id: id)
    }

    /// Test hook: blocks every event loop serving clients for `milliseconds`, so that tests can see the
    /// watchdog stop pinging. This connection's loop is blocked once the answer is written. Only with
    /// `--test-hooks`.
    private func wedge(_ id: RequestID, _ params: JSONValue?) throws {
        struct Params: Decodable { var milliseconds: Int }
        let request = try Self.decode(Params.self, params, method: "debug.wedgeEventLoop")
        let microseconds = UInt32(max(0, min(request.milliseconds, 60_000)) * 1000)
        let own = connection.eventLoop
        var wedged = 0
        for loop in context.flushers.group.makeIterator() where loop !== own {
            loop.execute { usleep(microseconds) }
            wedged += 1
        }
        wedged += 1
        connection.logger.warning("test hook: wedged event loops", metadata: ["loops": "\(wedged)", "ms": "\(request.milliseconds)"])
        connection.respond(result: ["wedgedLoops": JSONValue.integer(wedged)] as [String: JSONValue], id: id)
        // The answer is queued by a task on the loop, which schedules the loop's flush; a task queued now runs
        // after the first and before the flush, so the one it queues in turn runs after the answer is written.
        own.execute { own.execute { usleep(microseconds) } }
    }

    // MARK: Decoding

    private static func key(_ collection: String, _ id: String) throws -> EntityKey {
        guard EntityKey.isValidName(collection), EntityKey.isValidName(id) else {
            throw RPCError(
                code: .invalidParams,
                message: "params.collection and params.id must be 1-128 characters of A-Z a-z 0-9 _ - ."
            )
        }
        return EntityKey(collection: collection, id: id)
    }

    /// Straight from the parsed value (``JSONValueDecoder``): encoding it again for Foundation's decoder cost every
    /// request two passes (a sixth of the daemon's work on a burst of observations).
    static func decode<T: Decodable>(_ type: T.Type, _ params: JSONValue?, method: String) throws -> T {
        do {
            return try JSONValueDecoder.decode(T.self, from: params ?? .object([:]))
        } catch let error as DecodingError {
            throw RPCError(code: .invalidParams, message: "invalid params for \(method): \(describe(error))")
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            (["params"] + codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) must be \(describe(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)) must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            if context.debugDescription.hasPrefix("must ") { return "\(path(context.codingPath)) \(context.debugDescription)" }
            return "\(path(context.codingPath)) has an invalid value"
        @unknown default:
            return "malformed"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Bool.Type: "a boolean"
        case is JSONObject.Type: "an object"
        case is [JSONValue].Type: "an array"
        default: "of type \(type)"
        }
    }
}
