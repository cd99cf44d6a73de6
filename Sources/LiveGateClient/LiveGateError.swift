// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON

/// An error from the daemon (its stable code and message) or from the connection to it.
public struct LiveGateError: Error, Sendable, CustomStringConvertible {
    /// The daemon's JSON-RPC error code; `nil` for connection failures.
    public var code: RPCErrorCode?
    public var message: String
    public var data: JSONValue?

    public init(code: RPCErrorCode?, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    init(_ error: RPCError) {
        self.init(code: error.code, message: error.message, data: error.data)
    }

    static func connection(_ message: String) -> Self { Self(code: nil, message: message) }

    public var description: String {
        if let code { return "\(message) (code \(code))" }
        return message
    }
}
