// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import Hummingbird
import LiveCloudAPI
import LiveJSON

/// An error answered as `{"error": {...}}` with a 4xx/5xx status. Handlers throw it; Hummingbird writes it.
struct CloudHTTPError: HTTPResponseError {
    let status: HTTPResponse.Status
    let body: ErrorResponse
    /// Headers the answer carries besides its body's (`Upgrade` with a 426, say).
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ code: CloudErrorCode, _ message: String, currentVersion: Int64? = nil) {
        self.status = status
        self.body = ErrorResponse(code: code, message: message, currentVersion: currentVersion)
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try JSONResponse.make(status, body)
        response.headers.append(contentsOf: headers)
        return response
    }

    static func badRequest(_ message: String) -> Self { Self(.badRequest, .badRequest, message) }
    static let unauthenticated = Self(
        .unauthorized,
        .unauthenticated,
        "missing or unknown bearer token: log in at /v1/auth/login and send 'Authorization: Bearer <accessToken>'"
    )
    static let tokenExpired = Self(.unauthorized, .tokenExpired, "the access token has expired: log in again")
}

enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        body(status, try StoreText.bytes(value))
    }

    /// An entity (every write's answer), written member by member.
    static func make(_ status: HTTPResponse.Status, _ entity: Entity) throws -> Response {
        body(status, try StoreText.bytes(entity))
    }

    private static func body(_ status: HTTPResponse.Status, _ data: [UInt8]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }

    /// Reads a JSON body strictly (``RequestBody``), refuses members `shape` does not list, and decodes it:
    /// 415, 413 or 400 saying what is wrong.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, limit: Int, shape: BodyShape) async throws -> T {
        let value = try await RequestBody.value(of: request, limit: limit)
        try shape.check(value)
        if let value = value as? T { return value }
        do {
            return try JSONValueDecoder.decode(T.self, from: value)
        } catch let DecodingError.keyNotFound(key, _) {
            throw CloudHTTPError.badRequest("the request body lacks the member \"\(key.stringValue)\"")
        } catch let DecodingError.typeMismatch(_, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw CloudHTTPError.badRequest("the member \"\(path)\" has the wrong type")
        } catch let DecodingError.valueNotFound(_, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw CloudHTTPError.badRequest("the member \"\(path)\" must not be null")
        } catch {
            throw CloudHTTPError.badRequest("the request body is not of the expected shape: \(error)")
        }
    }
}
