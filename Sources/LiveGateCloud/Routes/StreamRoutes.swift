// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import LiveJSON

/// Live Service streams (the Kinvey guide): admins create streams; each user's ACL on a stream says who may
/// send to them (`publishers`) and who may receive what is sent to them (`subscribers`). A user reads and
/// sets their own ACL; admins any user's. Messages are received over the realtime WebSocket by subscribing
/// to `stream:<stream>/<user>`.
struct StreamRoutes: Sendable {
    let auth: AuthService
    let admins: Set<String>
    let store: any CloudStore
    let messageLimit: Int

    func register(on router: Router<CloudRequestContext>) {
        router.get(RouterPath(CloudPath.streams)) { request, _ -> Response in
            _ = try await auth.user(for: request)
            return try JSONResponse.make(.ok, StreamList(streams: try await store.streamNames(), messageLimit: messageLimit))
        }

        router.put("/v1/streams/:stream") { request, context -> Response in
            let user = try await auth.user(for: request)
            let stream = try Self.name(context, "stream")
            guard admins.contains(user) else {
                throw CloudHTTPError(.forbidden, .forbidden, "only an administrator may create streams, and \(user) is not one")
            }
            let created = try await store.createStream(stream)
            return try JSONResponse.make(created ? .created : .ok, StreamList(streams: try await store.streamNames(), messageLimit: messageLimit))
        }

        router.get("/v1/streams/:stream/users/:user/acl") { request, context -> Response in
            let (stream, target) = try await aclRequest(request, context)
            guard let acl = try await store.acl(stream: stream, user: target) else { throw Self.noStream(stream) }
            return try JSONResponse.make(.ok, acl)
        }

        router.put("/v1/streams/:stream/users/:user/acl") { request, context -> Response in
            let (stream, target) = try await aclRequest(request, context)
            let acl = try await JSONResponse.decode(StreamACL.self, from: request, limit: 1 << 20, shape: .streamACL)
            if let invalid = acl.invalidName {
                throw CloudHTTPError.badRequest("\"\(invalid)\" is not a user name: 1-128 characters of A-Z a-z 0-9 _ - .")
            }
            guard try await store.setACL(acl, stream: stream, user: target) else { throw Self.noStream(stream) }
            return try JSONResponse.make(.ok, acl)
        }

        router.post("/v1/streams/:stream/users/:user/messages") { request, context -> Response in
            let sender = try await auth.user(for: request)
            let stream = try Self.name(context, "stream")
            let recipient = try Self.name(context, "user")
            let body: SendStreamMessageRequest
            do {
                // The envelope around the message is small: a body far over the limit is refused unread.
                body = try await JSONResponse.decode(SendStreamMessageRequest.self, from: request, limit: messageLimit + 4096, shape: .streamMessage)
            } catch let error as CloudHTTPError where error.body.error.code == .payloadTooLarge {
                throw tooLarge(nil)
            }
            try StorableValue.check(body.message, what: "message")
            let size = try JSONEncoder().encode(body.message).count
            guard size <= messageLimit else { throw tooLarge(size) }
            switch try await store.send(body.message, stream: stream, from: sender, to: recipient) {
            case .sent(let sent): return try JSONResponse.make(.created, sent)
            case .noStream: throw Self.noStream(stream)
            case .forbidden:
                throw CloudHTTPError(
                    .forbidden,
                    .forbidden,
                    "\(sender) may not send to \(recipient) on the stream \(stream): \(recipient)'s ACL does not list \(sender) among its publishers"
                )
            }
        }
    }

    private func tooLarge(_ size: Int?) -> CloudHTTPError {
        let what = size.map { "the message is \($0) bytes" } ?? "the message is too large"
        return CloudHTTPError(
            .contentTooLarge,
            .payloadTooLarge,
            "\(what), over the stream message limit of \(messageLimit) bytes; it was not delivered"
        )
    }

    /// The stream and user of an ACL request, once the caller is known to be that user or an admin.
    private func aclRequest(_ request: Request, _ context: CloudRequestContext) async throws -> (String, String) {
        let caller = try await auth.user(for: request)
        let stream = try Self.name(context, "stream")
        let target = try Self.name(context, "user")
        guard caller == target || admins.contains(caller) else {
            throw CloudHTTPError(
                .forbidden,
                .forbidden,
                "\(caller) may not see or change \(target)'s access to the stream \(stream): only \(target) or an administrator may"
            )
        }
        return (stream, target)
    }

    private static func name(_ context: CloudRequestContext, _ parameter: String) throws -> String {
        let value = try context.parameters.require(parameter)
        guard EntityKey.isValidName(value) else {
            throw CloudHTTPError.badRequest("the \(parameter) name must be 1-128 characters of A-Z a-z 0-9 _ - .")
        }
        return value
    }

    static func noStream(_ stream: String) -> CloudHTTPError {
        CloudHTTPError(.notFound, .notFound, "no stream \(stream): an administrator creates streams (PUT /v1/streams/\(stream))")
    }
}
