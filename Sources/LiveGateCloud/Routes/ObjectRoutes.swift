// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import LiveJSON

/// Auth, `GET /v1/collections/{collection}/objects` (queries), object reads and writes, `GET /v1/stats`.
struct ObjectRoutes: Sendable {
    let auth: AuthService
    let permissions: Permissions
    let store: any CloudStore
    let hub: RealtimeHub
    let maxBodyBytes: Int

    func register(on router: Router<CloudRequestContext>) {
        router.post(RouterPath(CloudPath.login)) { request, context -> Response in
            let body = try await JSONResponse.decode(LoginRequest.self, from: request, limit: maxBodyBytes, shape: .login)
            let login: AuthService.LoginOutcome
            do {
                login = try await auth.login(username: body.username, password: body.password, address: context.peerAddress)
            } catch is PasswordChecker.Busy {
                var busy = try JSONResponse.make(
                    .tooManyRequests,
                    ErrorResponse(code: .unavailable, message: "too many logins at once: retry in a second")
                )
                busy.headers[.retryAfter] = "1"
                return busy
            }
            switch login {
            case .issued(let response):
                return try JSONResponse.make(.ok, response)
            case .refused:
                throw CloudHTTPError(.unauthorized, .invalidCredentials, "wrong username or password")
            case .throttled(let wait):
                let seconds = max(1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
                var error = CloudHTTPError(
                    .tooManyRequests,
                    .tooManyFailedLogins,
                    "too many failed logins for this user or from this address: retry in \(seconds) s"
                )
                error.headers[.retryAfter] = String(seconds)
                throw error
            }
        }

        router.post(RouterPath(CloudPath.refresh)) { request, _ -> Response in
            let body = try await JSONResponse.decode(RefreshRequest.self, from: request, limit: maxBodyBytes, shape: .refresh)
            guard let response = try await auth.refresh(body.refreshToken) else {
                throw CloudHTTPError(
                    .unauthorized,
                    .invalidRefreshToken,
                    "the refresh token is unknown, expired, already used or revoked: log in again"
                )
            }
            return try JSONResponse.make(.ok, response)
        }

        router.post(RouterPath(CloudPath.logout)) { request, _ -> Response in
            try await auth.logout(accessToken: try await auth.bearerToken(of: request))
            return Response(status: .noContent)
        }

        router.get("/v1/collections/:collection/objects") { request, context -> Response in
            let user = try await auth.user(for: request)
            let (query, page, limit) = try Self.queryRequest(request, context)
            try permissions.check(user, .read, query.collection)
            hub.recordQuery(query)
            return try JSONResponse.make(.ok, try await store.query(query, page: page, limit: limit))
        }

        router.get("/v1/collections/:collection/access") { request, context -> Response in
            let user = try await auth.user(for: request)
            let collection = context.parameters.get("collection") ?? ""
            guard EntityKey.isValidName(collection) else {
                throw CloudHTTPError(.badRequest, .badRequest, "a collection name is 1-128 characters of A-Z a-z 0-9 _ - .")
            }
            let access = CollectionAccess(
                collection: collection,
                read: permissions.allows(user, .read, collection),
                write: permissions.allows(user, .write, collection)
            )
            return try JSONResponse.make(.ok, access)
        }

        router.get("/v1/collections/:collection/objects/:id") { request, context -> Response in
            let user = try await auth.user(for: request)
            let key = try Self.key(context)
            try permissions.check(user, .read, key.collection)
            hub.recordFetch(key)
            guard let entity = try await store.get(key) else { throw CloudHTTPError(.notFound, .notFound, "no object \(key)") }
            guard !entity.deleted else {
                // The deletion's version: a client that knew an older one learns how far the object went.
                throw CloudHTTPError(.notFound, .notFound, "object \(key) was deleted", currentVersion: entity.version)
            }
            return try JSONResponse.make(.ok, entity)
        }

        router.post(RouterPath(CloudPath.readObjects)) { request, _ -> Response in
            let user = try await auth.user(for: request)
            let body = try await JSONResponse.decode(ReadObjectsRequest.self, from: request, limit: maxBodyBytes, shape: .readObjects)
            guard (1...ReadObjectsRequest.maximumKeys).contains(body.keys.count) else {
                throw CloudHTTPError.badRequest(
                    "keys holds 1 to \(ReadObjectsRequest.maximumKeys) objects, not \(body.keys.count): send several reads"
                )
            }
            for key in body.keys where !EntityKey.isValidName(key.collection) || !EntityKey.isValidName(key.id) {
                throw CloudHTTPError.badRequest("\(key): collection and id must be 1-128 characters of A-Z a-z 0-9 _ - .")
            }
            let readableCollections = Set(body.keys.map(\.collection).filter { permissions.allows(user, .read, $0) })
            let readable = body.keys.filter { readableCollections.contains($0.collection) }
            hub.recordFetches(readable)
            let (found, seq) = try await store.get(Array(Set(readable)))
            let results = body.keys.map { key -> ReadObjectResult in
                guard readableCollections.contains(key.collection) else {
                    return ReadObjectResult(
                        key: key,
                        error: .init(code: .forbidden, message: "\(user) may not read the collection \(key.collection)")
                    )
                }
                guard let entity = found[key] else { return ReadObjectResult(key: key, error: .init(code: .notFound, message: "no object \(key)")) }
                guard !entity.deleted else {
                    return ReadObjectResult(
                        key: key,
                        error: .init(code: .notFound, message: "object \(key) was deleted", currentVersion: entity.version)
                    )
                }
                return ReadObjectResult(key: key, entity: entity)
            }
            return try JSONResponse.make(.ok, ReadObjectsResponse(results: results, seq: seq))
        }

        router.put("/v1/collections/:collection/objects/:id") { request, context -> Response in
            try await writeData(request, context, what: "a JSON object", change: EntityChange.replace)
        }

        router.patch("/v1/collections/:collection/objects/:id") { request, context -> Response in
            try await writeData(request, context, what: "a JSON merge patch object", change: EntityChange.merge)
        }

        router.delete("/v1/collections/:collection/objects/:id") { request, context -> Response in
            let writer = try await auth.writer(for: request)
            let key = try Self.key(context)
            try permissions.check(writer.user, .write, key.collection)
            var ifVersion: Int64?
            try QueryText.check(request)
            if let text = request.uri.queryParameters["ifVersion"] {
                // A whole number, as in a body (`3.0` is 3).
                guard let number = try? JSONNumber(validating: String(text)), let version = number.integerValue(Int64.self), version >= 0 else {
                    throw CloudHTTPError.badRequest("ifVersion must be a whole number, not \(text)")
                }
                ifVersion = version
            }
            let idempotency = try Self.idempotencyKey(request, user: writer.user, body: "")
            return try Self.respond(try await write(key, .delete, ifVersion: ifVersion, idempotency: idempotency, by: writer), key, ifVersion)
        }

        router.get(RouterPath(CloudPath.stats)) { _, _ -> Response in
            var stats = hub.stats()
            (stats.logins, stats.refreshes) = auth.counts
            (stats.writeTransactions, stats.objectWrites) = store.writesCommitted
            return try JSONResponse.make(.ok, stats)
        }
    }

    /// PUT and PATCH: a `{data, ifVersion?}` body whose data must be an object.
    private func writeData(
        _ request: Request,
        _ context: CloudRequestContext,
        what: String,
        change: (JSONValue) -> EntityChange
    ) async throws -> Response {
        let writer = try await auth.writer(for: request)
        let key = try Self.key(context)
        try permissions.check(writer.user, .write, key.collection)
        let body = try WriteBody.read(try await RequestBody.value(of: request, limit: maxBodyBytes))
        guard body.data.isObject else { throw CloudHTTPError.badRequest("\"data\" must be \(what)") }
        try StorableValue.check(body.data, what: "data")
        let idempotency = try Self.idempotencyKey(request, user: writer.user, body: try StoreText.encode(body))
        return try Self.respond(
            try await write(key, change(body.data), ifVersion: body.ifVersion, idempotency: idempotency, by: writer),
            key,
            body.ifVersion
        )
    }

    /// The store's write, confirming the writer's grant in its transaction where the store is shared; a grant
    /// the store refuses is dropped from this instance's copy.
    private func write(
        _ key: EntityKey,
        _ change: EntityChange,
        ifVersion: Int64?,
        idempotency: IdempotencyKey?,
        by writer: AuthService.Writer
    ) async throws -> WriteOutcome {
        do {
            return try await store.write(key, change, ifVersion: ifVersion, idempotency: idempotency, confirmingGrant: writer.grantToConfirm)
        } catch let error as CloudHTTPError where error.status == .unauthorized {
            if let hash = writer.grantToConfirm { auth.forget(hash) }
            throw error
        }
    }

    /// The request's `Idempotency-Key`, if it has a valid one, bound to the request: its method, its target (path and
    /// query) and `body`, its body's value in livegate's one written form.
    private static func idempotencyKey(_ request: Request, user: String, body: String) throws -> IdempotencyKey? {
        guard let name = HTTPField.Name("Idempotency-Key"), let key = request.headers[name] else { return nil }
        guard IdempotencyKey.isValid(key) else {
            throw CloudHTTPError.badRequest("Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 _ - . : (got \"\(key.prefix(40))\")")
        }
        let target = request.uri.path + (request.uri.query.map { "?" + $0 } ?? "")
        return IdempotencyKey(
            user: user,
            key: key,
            fingerprint: IdempotencyKey.fingerprint(method: request.method.rawValue, target: target, body: body)
        )
    }

    private static func respond(_ outcome: WriteOutcome, _ key: EntityKey, _ ifVersion: Int64?) throws -> Response {
        switch outcome {
        case .created(let entity): return try JSONResponse.make(.created, entity)
        case .updated(let entity), .deleted(let entity): return try JSONResponse.make(.ok, entity)
        case .notFound: throw CloudHTTPError(.notFound, .notFound, "no object \(key)")
        case .conflict(let currentVersion):
            throw CloudHTTPError(
                .conflict,
                .versionConflict,
                "\(key) is at version \(currentVersion), not \(ifVersion ?? 0)",
                currentVersion: currentVersion
            )
        case .keyReused(let idempotencyKey, let target):
            throw CloudHTTPError(
                .unprocessableContent,
                .idempotencyKeyReused,
                "the Idempotency-Key \(idempotencyKey) was used for another request already (a write of \(target)): nothing was done; use a new key for each write"
            )
        }
    }

    /// The query of `GET /v1/collections/{collection}/objects`: `where` (a JSON object of field → value),
    /// `sort` (a field, `-field` for descending), `limit` (1-100, default 20), and at most one of `after`,
    /// `before` (cursors) and `last=true`.
    private static func queryRequest(_ request: Request, _ context: CloudRequestContext) throws -> (
        CollectionQuery, PageRequest, Int
    ) {
        try QueryText.check(request)
        let parameters = request.uri.queryParameters
        let known: Set<String> = ["where", "sort", "limit", "after", "before", "last"]
        if let unknown = parameters.map({ String($0.key) }).first(where: { !known.contains($0) }) {
            throw CloudHTTPError.badRequest("unknown query parameter \"\(unknown)\" (known: \(known.sorted().joined(separator: ", ")))")
        }
        var query = CollectionQuery(collection: try context.parameters.require("collection"))
        if let text = parameters["where"] {
            // LiveJSON's parser: it bounds nesting (Foundation's decoder traps past 512 unclosed levels).
            guard let value = try? JSONValue(parsing: String(text)),
                case .object(let filters) = value
            else {
                // A form encoder writes a space as "+", which the query keeps as a plus sign (RFC 3986).
                let hint = text.contains("+") ? " (a + in the query is a plus sign: encode a space as %20)" : ""
                throw CloudHTTPError.badRequest("where must be a JSON object of field names and values, like {\"channel\":\"c1\"}\(hint)")
            }
            // Field names are ASCII (`CollectionQuery.problem` refuses any other), so a dictionary merges none.
            query.where = Dictionary(filters.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 })
            try StorableValue.check(value, what: "where")
        }
        if let text = parameters["sort"].map(String.init) {
            query.sort = text.hasPrefix("-") ? QuerySort(field: String(text.dropFirst()), descending: true) : QuerySort(field: text)
        }
        if let problem = query.problem { throw CloudHTTPError.badRequest(problem) }
        var limit = 20
        if let text = parameters["limit"] {
            guard let value = Int(String(text)), (1...100).contains(value) else {
                throw CloudHTTPError.badRequest("limit must be a whole number from 1 to 100, not \(text)")
            }
            limit = value
        }
        let cursorParameters = ["after", "before", "last"].filter { parameters[Substring($0)] != nil }
        guard cursorParameters.count <= 1 else {
            throw CloudHTTPError.badRequest("give at most one of after, before and last (got \(cursorParameters.joined(separator: ", ")))")
        }
        func position(_ name: String) throws -> QueryPosition? {
            guard let text = parameters[Substring(name)] else { return nil }
            guard let position = QueryPosition(cursor: String(text)) else {
                throw CloudHTTPError.badRequest("\(name) is not a cursor: pass a nextCursor or previousCursor from an earlier page")
            }
            return position
        }
        let page: PageRequest
        if let after = try position("after") {
            page = .after(after)
        } else if let before = try position("before") {
            page = .before(before)
        } else if let last = parameters["last"] {
            guard last == "true" else { throw CloudHTTPError.badRequest("last must be true when given, not \(last)") }
            page = .last
        } else {
            page = .first
        }
        return (query, page, limit)
    }

    private static func key(_ context: CloudRequestContext) throws -> EntityKey {
        let collection = try context.parameters.require("collection")
        let id = try context.parameters.require("id")
        guard EntityKey.isValidName(collection), EntityKey.isValidName(id) else {
            throw CloudHTTPError.badRequest("collection and id must be 1-128 characters of A-Z a-z 0-9 _ - .")
        }
        return EntityKey(collection: collection, id: id)
    }
}

extension Permissions {
    /// Throws 403 `forbidden` when `user` may not `access` the collection.
    func check(_ user: String, _ access: Access, _ collection: String) throws {
        guard allows(user, access, collection) else {
            throw CloudHTTPError(.forbidden, .forbidden, "\(user) may not \(access.rawValue) the collection \(collection)")
        }
    }
}
