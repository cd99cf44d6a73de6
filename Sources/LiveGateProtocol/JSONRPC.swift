// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// A JSON-RPC 2.0 request id: a number or a string (or `null`, which JSON-RPC discourages but allows),
/// echoed back in the response as it came.
public enum RequestID: Hashable, Sendable, Codable, CustomStringConvertible {
    case number(Int64)
    case string(String)
    /// Any other number (a fractional part, or an integer beyond Int64: JSON-RPC says ids SHOULD NOT have a
    /// fraction; it is answered all the same), kept exactly and echoed as it came (in its canonical form).
    case exact(JSONNumber)
    /// `"id": null`: a request all the same (only a missing id makes a notification), answered with `null`.
    case null

    public init(from decoder: any Decoder) throws {
        // As a `JSONValue`: exact through LiveJSON's decoder (a number's text kept).
        let container = try decoder.singleValueContainer()
        guard let id = RequestID(try container.decode(JSONValue.self)) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "a request id is a number, a string or null")
        }
        self = id
    }

    /// The id a request's `id` member holds, or `nil` when it is not one JSON-RPC allows (an object, an
    /// array, a boolean).
    public init?(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .string(let string): self = .string(string)
        case .number(let number): self.init(number: number)
        case .bool, .array, .object: return nil
        }
    }

    /// The id a number in a request's `id` member is: an `Int64` when it is written as one, else the number
    /// exactly (`1.0` stays `1.0`, `10000000000000000999` stays itself).
    public init(number: JSONNumber) {
        self = number.int64Value.map(Self.number) ?? .exact(number)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .exact(let value): try container.encode(JSONValue.number(value))
        case .null: try container.encodeNil()
        }
    }

    public var description: String {
        switch self {
        case .number(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .exact(let value): value.text
        case .null: "null"
        }
    }
}

/// A request as it arrives: the envelope is checked first, `params` is decoded per method later.
public struct RPCRequestEnvelope: Sendable, Equatable {
    /// `nil` when the request has no `id` member: a notification, which gets no answer.
    public var id: RequestID?
    public var method: String
    public var params: JSONValue?

    public init(id: RequestID?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        self.params = params
    }

    /// The request in `value` (one request of a frame, or one member of a batch), or the error to answer it
    /// with and the id to answer under (`null` when the id could not be read).
    public static func read(_ value: JSONValue) -> Result<RPCRequestEnvelope, RejectedRequest> {
        guard case .object(let members) = value else {
            return .failure(RejectedRequest(error: notARequest, id: .null))
        }
        var id: RequestID?
        if let member = members["id"] {
            guard let valid = RequestID(member) else {
                return .failure(
                    RejectedRequest(error: RPCError(code: .invalidRequest, message: "the request's id must be a string, a number or null"), id: .null)
                )
            }
            id = valid
        }
        guard members["jsonrpc"] == .string("2.0"), case .string(let method)? = members["method"] else {
            return .failure(RejectedRequest(error: notARequest, id: id ?? .null))
        }
        let params = members["params"]
        switch params {
        case nil, .object?, .array?: break
        default:
            return .failure(
                RejectedRequest(
                    error: RPCError(code: .invalidRequest, message: "params must be an object (or an array), or be left out"),
                    id: id ?? .null
                )
            )
        }
        return .success(RPCRequestEnvelope(id: id, method: method, params: params))
    }

    /// A request that cannot be performed, with the id to answer it under.
    public struct RejectedRequest: Error, Sendable, Equatable {
        public var error: RPCError
        public var id: RequestID
    }

    public static let notARequest = RPCError(
        code: .invalidRequest,
        message: "not a JSON-RPC 2.0 request: send an object with \"jsonrpc\":\"2.0\", a \"method\", its \"params\" and an \"id\""
    )
}

/// The limits of a request frame, besides its size (`maxFrameBytes`): JSON nested at most this deep, and at
/// most this many requests in a batch. `hello` reports them; `Protocol/ipc/README.md` describes them.
public enum RequestLimits {
    public static let maxJSONDepth = JSONValue.maxParsingDepth
    public static let maxBatchRequests = 100
}

/// A request as a client sends it.
public struct RPCRequest<Params: Encodable & Sendable>: Encodable, Sendable {
    public var jsonrpc = "2.0"
    public var id: RequestID
    public var method: String
    public var params: Params

    public init(id: RequestID, method: String, params: Params) {
        self.id = id
        self.method = method
        self.params = params
    }
}

/// A successful response.
public struct RPCResponse<Result: Encodable & Sendable>: Encodable, Sendable {
    public var jsonrpc = "2.0"
    public var id: RequestID
    public var result: Result

    public init(id: RequestID, result: Result) {
        self.id = id
        self.result = result
    }
}

/// An error response. `id` is `null` when the request's id could not be read (parse errors, oversized frames).
public struct RPCErrorResponse: Codable, Sendable {
    public var jsonrpc = "2.0"
    public var id: RequestID?
    public var error: RPCError

    public init(id: RequestID?, error: RPCError) {
        self.id = id
        self.error = error
    }

    private enum CodingKeys: String, CodingKey { case jsonrpc, id, error }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jsonrpc, forKey: .jsonrpc)
        try container.encode(id, forKey: .id)  // explicit null, as JSON-RPC 2.0 requires
        try container.encode(error, forKey: .error)
    }
}

/// A JSON-RPC error object: a stable code, a message a person can act on, and optional data.
public struct RPCError: Error, Codable, Sendable, Equatable {
    public var code: RPCErrorCode
    public var message: String
    public var data: JSONValue?

    public init(code: RPCErrorCode, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }
}

/// Any decoded message from the daemon, as a client reads it: a response (has `id`) or a notification (has `method`).
public struct RPCIncomingMessage: Decodable, Sendable {
    public var id: RequestID?
    public var method: String?
    public var params: JSONValue?
    public var result: JSONValue?
    public var error: RPCError?
}
