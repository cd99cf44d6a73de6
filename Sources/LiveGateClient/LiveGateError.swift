// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON

/// An error from the daemon (its stable code and message) or from the connection to it.
public struct LiveGateError: Error, Sendable, CustomStringConvertible {
    /// Where an error comes from.
    public enum Kind: String, Sendable, Equatable {
        /// The daemon answered a request with this error (``code`` says which).
        case daemon
        /// The daemon refused this client when it connected (``code``: `notPermitted` by its access policy,
        /// `limitExceeded` when it serves as many connections as it may); the message says what to do.
        case refused
        /// The daemon could not be reached, or the connection ended (``code`` is set when the daemon said why,
        /// e.g. `cloudUnavailable` when it shuts down).
        case connection
        /// This library could not use what the daemon sent (a model that does not decode, say).
        case client
    }

    /// The daemon's JSON-RPC error code; `nil` for failures of the connection or of this library.
    public var code: RPCErrorCode?
    public var message: String
    public var data: JSONValue?
    public var kind: Kind

    /// `kind` defaults to `.daemon` with a code, `.client` without.
    public init(code: RPCErrorCode?, message: String, data: JSONValue? = nil, kind: Kind? = nil) {
        self.code = code
        self.message = message
        self.data = data
        self.kind = kind ?? (code == nil ? .client : .daemon)
    }

    init(_ error: RPCError) {
        self.init(code: error.code, message: error.message, data: error.data, kind: .daemon)
    }

    static func connection(_ message: String, code: RPCErrorCode? = nil) -> Self { Self(code: code, message: message, kind: .connection) }

    /// The daemon's `connection.closing`: a refusal when it comes instead of the `hello` answer, else the
    /// end of an established connection.
    static func closing(_ params: ConnectionClosingParams, beforeHello: Bool) -> Self {
        if beforeHello {
            return Self(code: params.code, message: "livegated refused the connection: \(params.message)", kind: .refused)
        }
        return connection("livegated closed the connection: \(params.message)", code: params.code)
    }

    public var description: String {
        if let code { return "\(message) (code \(code))" }
        return message
    }
}
