// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import Hummingbird
import LiveCloudAPI
import LiveJSON

/// A request's JSON body, read strictly: said to be `application/json` (415 otherwise), at most `limit` bytes
/// (413), UTF-8 without a byte order mark, and one JSON value (400 otherwise, saying what is wrong).
///
/// Nothing else reads a body: a lenient reader (Foundation's, say) would take UTF-16 or a BOM, and a client
/// would not learn that another server refuses what this one took.
enum RequestBody {
    /// The body's JSON value.
    static func value(of request: Request, limit: Int) async throws -> JSONValue {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch {
            throw CloudHTTPError(.contentTooLarge, .payloadTooLarge, "the request body is over the limit of \(limit) bytes")
        }
        guard buffer.readableBytes > 0 else {
            throw CloudHTTPError.badRequest("the request has no body: send one JSON object, as Content-Type: application/json")
        }
        try checkMediaType(request.headers[.contentType])
        return try parse(buffer.readableBytesView)
    }

    /// `application/json`, optionally with `charset=utf-8`; any other type, or none, is 415.
    static func checkMediaType(_ header: String?) throws {
        guard let header else {
            throw CloudHTTPError(
                .unsupportedMediaType,
                .unsupportedMediaType,
                "the request has a body but no Content-Type: send Content-Type: application/json"
            )
        }
        var parts = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let type = parts.isEmpty ? "" : parts.removeFirst()
        let acceptedParameters: Set<String> = ["charset=utf-8", "charset=\"utf-8\""]
        guard type == "application/json", parts.allSatisfy(acceptedParameters.contains) else {
            throw CloudHTTPError(
                .unsupportedMediaType,
                .unsupportedMediaType,
                "the request body is said to be \"\(header.prefix(100))\": send it as Content-Type: application/json (UTF-8)"
            )
        }
    }

    /// One JSON value of UTF-8 text with no byte order mark.
    static func parse(_ bytes: some Collection<UInt8>) throws -> JSONValue {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw CloudHTTPError.badRequest("the request body starts with a byte order mark: send UTF-8 JSON without one")
        }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) || bytes.prefix(4).contains(0) {
            throw CloudHTTPError.badRequest("the request body is not UTF-8 (UTF-16 or UTF-32?): send UTF-8 JSON")
        }
        do {
            return try JSONValue(parsing: bytes)
        } catch let error where error.isNumberLimit {
            throw CloudHTTPError.badRequest(
                "the request body holds a number longer than \(JSONNumber.maxTextLength) characters written out without an exponent (at byte \(error.offset)): numbers are kept exactly"
            )
        } catch {
            throw CloudHTTPError.badRequest("the request body is not valid JSON: \(error)")
        }
    }
}

/// The members a request body's objects may have, as `Protocol/cloud/openapi.json` says
/// (`additionalProperties: false`): a member not listed is refused with 400 naming it, since a misspelt one
/// would otherwise be dropped and the request carried out without it.
indirect enum BodyShape: Sendable {
    /// An object with these members (each with its own shape).
    case object([String: BodyShape])
    /// An array whose elements have this shape.
    case array(BodyShape)
    /// Anything (a value the decoder checks, or data that is the caller's own).
    case any

    /// Throws 400 naming the first member `value` has that its shape does not list.
    func check(_ value: JSONValue, at path: String = "") throws {
        switch (self, value) {
        case (.object(let members), .object(let object)):
            for (name, member) in object {
                guard let shape = members[name] else {
                    let known = members.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
                    throw CloudHTTPError.badRequest("the request body has an unknown member \"\(path)\(name)\": it takes \(known) only")
                }
                try shape.check(member, at: "\(path)\(name).")
            }
        case (.array(let element), .array(let elements)):
            for (index, item) in elements.enumerated() { try element.check(item, at: "\(path.dropLast())[\(index)].") }
        default:
            return  // a type the decoder refuses with its own message
        }
    }
}

extension BodyShape {
    static let write = object(["data": .any, "ifVersion": .any])
    static let login = object(["username": .any, "password": .any])
    static let refresh = object(["refreshToken": .any])
    static let readObjects = object(["keys": .array(.object(["collection": .any, "id": .any]))])
    static let streamACL = object(["publishers": .any, "subscribers": .any])
    static let streamMessage = object(["message": .any])
    static let faults = object(
        Dictionary(
            uniqueKeysWithValues: [
                "dropConnections", "refuseConnectionsForMs", "failRequests", "delayRequestsMs", "delayRealtimeRequestsMs",
                "delayEventPublicationMs", "delayStreamAdmissionMs", "expireTokens", "loseWriteAnswers",
            ].map { ($0, BodyShape.any) }
        )
    )
}

/// A request's query, checked before it is read: every `%` starts two hex digits, and what they encode is
/// UTF-8 (a decoder that made `%FF` U+FFFD would filter on a character the client never sent).
enum QueryText {
    static func check(_ request: Request) throws {
        guard let query = request.uri.query, query.utf8.contains(UInt8(ascii: "%")) else { return }
        for part in query.split(separator: "&") {
            let bytes = Array(part.utf8)
            var decoded: [UInt8] = []
            decoded.reserveCapacity(bytes.count)
            var index = 0
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
                    else {
                        throw CloudHTTPError.badRequest("the query has a % not followed by two hex digits in \"\(part.prefix(100))\"")
                    }
                    decoded.append(high << 4 | low)
                    index += 3
                } else {
                    decoded.append(bytes[index])
                    index += 1
                }
            }
            guard String(validating: decoded, as: UTF8.self) != nil else {
                throw CloudHTTPError.badRequest("the query's percent-encoding is not UTF-8 in \"\(part.prefix(100))\": encode text as UTF-8")
            }
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
