// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import LiveJSON
import NIOCore
import NIOHTTP1
import NIOPosix

/// The cloud's REST API, as the engine uses it. Every failure becomes a ``LiveError``; no credential or
/// token ever appears in an error message.
package struct CloudClient: Sendable {
    /// `http://host:port`, without a trailing slash.
    let baseURL: String
    /// The engine's HTTP client, renewed when the cloud went silent (``CloudConnections``).
    let connections: CloudConnections
    let timeout: TimeAmount

    package init(baseURL: String, connections: CloudConnections = CloudConnections(), timeout: TimeAmount = .seconds(10)) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.connections = connections
        self.timeout = timeout
    }

    func login(_ request: LoginRequest) async throws(LiveError) -> LoginResponse {
        let (status, body) = try await send(method: .POST, path: CloudPath.login, token: nil, body: request)
        guard status == .ok else { throw Self.error(status: status, body: body, what: "login") }
        return try Self.decode(LoginResponse.self, from: body, what: "login")
    }

    func refresh(_ request: RefreshRequest) async throws(LiveError) -> LoginResponse {
        let (status, body) = try await send(method: .POST, path: CloudPath.refresh, token: nil, body: request)
        guard status == .ok else { throw Self.error(status: status, body: body, what: "session renewal") }
        return try Self.decode(LoginResponse.self, from: body, what: "session renewal")
    }

    /// What the session's user may do with `collection` (reads nothing of it), within `timeout`.
    func access(_ collection: String, token: String, timeout: TimeAmount) async throws(LiveError) -> CollectionAccess {
        let (status, body) = try await send(
            method: .GET,
            path: CloudPath.access(collection),
            token: token,
            body: Optional<Int>.none,
            timeout: timeout
        )
        guard status == .ok else { throw Self.error(status: status, body: body, what: "access check of \(collection)") }
        return try Self.decode(CollectionAccess.self, from: body, what: "access check")
    }

    func logout(token: String) async throws(LiveError) {
        let (status, body) = try await send(method: .POST, path: CloudPath.logout, token: token, body: Optional<Int>.none)
        guard status == .noContent else { throw Self.error(status: status, body: body, what: "logout") }
    }

    /// The stored entity; its tombstone (`deleted`, no data, the deletion's version) when the object was
    /// deleted; `nil` when the cloud never had it.
    package func fetch(_ key: EntityKey, token: String) async throws(LiveError) -> Entity? {
        let (status, body) = try await send(method: .GET, path: CloudPath.object(key), token: token, body: Optional<Int>.none)
        if status == .notFound {
            // A deleted object's 404 carries the deletion's version (Protocol/cloud, Objects).
            let answer = try? CloudJSON.decode(ErrorResponse.self, from: body.readableBytesView)
            return Self.notFound(key, answer?.error)
        }
        guard status == .ok else { throw Self.error(status: status, body: body, what: "fetch of \(key)") }
        return try Self.decode(Entity.self, from: body, what: "fetch of \(key)")
    }

    /// Many objects in one request (at most ``ReadObjectsRequest/maximumKeys``): per key, as ``fetch(_:token:)``
    /// answers for it (its entity, its tombstone, `nil`), or the error its own fetch would have thrown.
    /// Also the event log's sequence number the read is as of (`nil` when the cloud does not say).
    func read(_ keys: [EntityKey], token: String) async throws(LiveError) -> (results: [EntityKey: Result<Entity?, LiveError>], seq: Int64?) {
        let what = "read of \(keys.count) objects"
        let (status, body) = try await send(method: .POST, path: CloudPath.readObjects, token: token, body: ReadObjectsRequest(keys: keys))
        guard status == .ok else { throw Self.error(status: status, body: body, what: what) }
        let response = try Self.decode(ReadObjectsResponse.self, from: body, what: what)
        var results: [EntityKey: Result<Entity?, LiveError>] = [:]
        for result in response.results {
            let key = result.key
            if let entity = result.entity {
                results[key] = .success(entity)
            } else if let error = result.error, error.code == .notFound {
                results[key] = .success(Self.notFound(key, error))
            } else {
                let detail = result.error?.message ?? "the answer held neither the entity nor an error"
                results[key] = .failure(
                    result.error?.code == .forbidden
                        ? LiveError(code: .notPermitted, message: "the cloud refused the fetch of \(key): \(detail)")
                        : LiveError(code: .cloudUnavailable, message: "fetch of \(key) failed: \(detail)")
                )
            }
        }
        for key in keys where results[key] == nil {
            results[key] = .failure(LiveError(code: .cloudUnavailable, message: "the cloud's answer to the \(what) left out \(key)"))
        }
        return (results, response.seq)
    }

    /// What a `not_found` answer for `key` says: its tombstone when it names the deletion's version
    /// (`currentVersion`), else that the cloud never had it (`nil`).
    private static func notFound(_ key: EntityKey, _ error: ErrorResponse.Body?) -> Entity? {
        error?.currentVersion.map {
            Entity(collection: key.collection, id: key.id, version: $0, data: [:], createdAt: "", updatedAt: "", deleted: true)
        }
    }

    /// - Parameter writeID: sent as `Idempotency-Key`: a retry with the same id is applied once.
    func put(_ key: EntityKey, _ request: PutObjectRequest, writeID: String? = nil, token: String) async throws(LiveError) -> Entity {
        let (status, body) = try await send(method: .PUT, path: CloudPath.object(key), token: token, body: request, writeID: writeID)
        guard status == .ok || status == .created else { throw Self.error(status: status, body: body, what: "write of \(key)") }
        return try Self.decode(Entity.self, from: body, what: "write of \(key)")
    }

    /// Merges a JSON merge patch into the object's data.
    func patch(_ key: EntityKey, _ request: PutObjectRequest, writeID: String? = nil, token: String) async throws(LiveError) -> Entity {
        let (status, body) = try await send(method: .PATCH, path: CloudPath.object(key), token: token, body: request, writeID: writeID)
        guard status == .ok else { throw Self.error(status: status, body: body, what: "update of \(key)") }
        return try Self.decode(Entity.self, from: body, what: "update of \(key)")
    }

    /// Deletes the object; returns its tombstone (`deleted: true`, the next version).
    func delete(_ key: EntityKey, ifVersion: Int64?, writeID: String? = nil, token: String) async throws(LiveError) -> Entity {
        let path = CloudPath.object(key) + (ifVersion.map { "?ifVersion=\($0)" } ?? "")
        let (status, body) = try await send(method: .DELETE, path: path, token: token, body: Optional<Int>.none, writeID: writeID)
        guard status == .ok else { throw Self.error(status: status, body: body, what: "deletion of \(key)") }
        return try Self.decode(Entity.self, from: body, what: "deletion of \(key)")
    }

    /// One page of a query.
    func query(_ query: CollectionQuery, _ page: PageRequest, limit: Int, token: String) async throws(LiveError) -> QueryPage {
        var parameters: [String] = ["limit=\(limit)"]
        func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }
        if !query.where.isEmpty {
            let text = (try? SortedJSONEncoder().encode(query.where)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            parameters.append("where=" + encoded(text))
        }
        if let sort = query.sort { parameters.append("sort=" + (sort.descending ? "-" : "") + sort.field) }
        switch page {
        case .first: break
        case .last: parameters.append("last=true")
        case .after(let position): parameters.append("after=" + position.cursor)
        case .before(let position): parameters.append("before=" + position.cursor)
        }
        let path = CloudPath.objects(query.collection) + "?" + parameters.joined(separator: "&")
        let (status, body) = try await send(method: .GET, path: path, token: token, body: Optional<Int>.none)
        guard status == .ok else { throw Self.error(status: status, body: body, what: "query of \(query.collection)") }
        return try Self.decode(QueryPage.self, from: body, what: "query of \(query.collection)")
    }

    // MARK: Streams

    func sendStreamMessage(_ message: JSONValue, stream: String, to user: String, token: String) async throws(LiveError) -> SentStreamMessage {
        let what = "message to \(user) on the stream \(stream)"
        let (status, body) = try await send(
            method: .POST,
            path: CloudPath.streamMessages(stream, user: user),
            token: token,
            body: SendStreamMessageRequest(message: message)
        )
        guard status == .created else { throw Self.error(status: status, body: body, what: what) }
        return try Self.decode(SentStreamMessage.self, from: body, what: what)
    }

    func streamACL(stream: String, user: String, token: String) async throws(LiveError) -> StreamACL {
        let what = "read of \(user)'s access to the stream \(stream)"
        let (status, body) = try await send(method: .GET, path: CloudPath.streamACL(stream, user: user), token: token, body: Optional<Int>.none)
        guard status == .ok else { throw Self.error(status: status, body: body, what: what) }
        return try Self.decode(StreamACL.self, from: body, what: what)
    }

    func setStreamACL(_ acl: StreamACL, stream: String, user: String, token: String) async throws(LiveError) -> StreamACL {
        let what = "grant of \(user)'s access to the stream \(stream)"
        let (status, body) = try await send(method: .PUT, path: CloudPath.streamACL(stream, user: user), token: token, body: acl)
        guard status == .ok else { throw Self.error(status: status, body: body, what: what) }
        return try Self.decode(StreamACL.self, from: body, what: what)
    }

    private func send(
        method: HTTPMethod,
        path: String,
        token: String?,
        body: (some Encodable)?,
        writeID: String? = nil,
        timeout: TimeAmount? = nil
    ) async throws(LiveError) -> (HTTPResponseStatus, ByteBuffer) {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let writeID { request.headers.add(name: "Idempotency-Key", value: writeID) }
        do {
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                // LiveJSON's encoder: the data's numbers and names exactly as they are.
                request.body = .bytes(ByteBuffer(bytes: try SortedJSONEncoder().encode(body)))
            }
            let response = try await connections.client.execute(request, timeout: timeout ?? self.timeout)
            let bytes = try await response.body.collect(upTo: 64 << 20)
            return (response.status, bytes)
        } catch {
            throw LiveError(code: .cloudUnavailable, message: "the cloud at \(baseURL) could not be reached: \(Self.reason(error))")
        }
    }

    /// Why a call did not reach the cloud, as a person reads it: the system's words for a socket error
    /// ("Connection refused"), not NIO's description of where it was raised.
    package static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return reason(first.error) }
            if let dns = error.dnsAAAAError ?? error.dnsAError { return "the name \(error.host) could not be resolved (\(dns))" }
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return "the connection timed out" }
        return "\(error)"
    }

    private static func decode<T: Decodable>(_ type: T.Type, from body: ByteBuffer, what: String) throws(LiveError) -> T {
        do {
            return try CloudJSON.decode(T.self, from: body.readableBytesView)
        } catch {
            throw LiveError(code: .cloudUnavailable, message: "the cloud's answer to the \(what) was not understood: \(error)")
        }
    }

    private static func error(status: HTTPResponseStatus, body: ByteBuffer, what: String) -> LiveError {
        let parsed = try? CloudJSON.decode(ErrorResponse.self, from: body.readableBytesView)
        let detail = parsed?.error.message ?? "HTTP \(status.code)"
        switch (status, parsed?.error.code) {
        case (.forbidden, _):
            // The cloud's reason names who may not do what; the request is named only when it gave none.
            let message = parsed.map { "the cloud refused: \($0.error.message)" } ?? "the cloud refused the \(what): \(detail)"
            return LiveError(code: .notPermitted, message: message)
        case (.unauthorized, _):
            return LiveError(code: .unauthenticated, message: "the cloud refused the \(what): \(detail)")
        case (.notFound, _):
            return LiveError(code: .notFound, message: "\(what): \(detail)")
        case (.conflict, _), (.preconditionFailed, _):
            return LiveError(
                code: .versionConflict,
                message: detail,
                currentVersion: parsed?.error.currentVersion
            )
        case (.payloadTooLarge, _):
            return LiveError(code: .messageTooLarge, message: "\(what): \(detail)")
        case (.badRequest, _):
            return LiveError(code: .invalidArgument, message: "\(what): \(detail)")
        case (.unprocessableEntity, _):
            // The write's Idempotency-Key was the cloud's for another request: permanent, never retried.
            return LiveError(code: .invalidArgument, message: "\(what): \(detail)")
        default:
            return LiveError(code: .cloudUnavailable, message: "\(what) failed: \(detail)")
        }
    }
}
