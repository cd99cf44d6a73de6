// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// A JSON-RPC 2.0 request id: a number or a string, echoed back in the response.
public enum RequestID: Hashable, Sendable, Codable, CustomStringConvertible {
    case number(Int64)
    case string(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(Int64.self) {
            self = .number(number)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        }
    }

    public var description: String {
        switch self {
        case .number(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        }
    }
}

/// A request as it arrives: the envelope is checked first, `params` is decoded per method later.
public struct RPCRequestEnvelope: Decodable, Sendable {
    public var jsonrpc: String?
    public var id: RequestID?
    public var method: String?
    public var params: JSONValue?
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
