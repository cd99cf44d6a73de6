// Licensed under the Apache License, Version 2.0.

/// The stable error codes of the local protocol. The numbers never change meaning; new codes may be added.
/// `Protocol/ipc/README.md` lists them with what a client should do about each.
public struct RPCErrorCode: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { self.rawValue = try decoder.singleValueContainer().decode(Int.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { "\(rawValue)" }

    // JSON-RPC 2.0 reserved codes.
    /// The frame is not valid JSON.
    public static let parseError = Self(rawValue: -32700)
    /// Valid JSON, but not a JSON-RPC 2.0 request object.
    public static let invalidRequest = Self(rawValue: -32600)
    /// No such method.
    public static let methodNotFound = Self(rawValue: -32601)
    /// The method's parameters are missing, of the wrong type or out of range.
    public static let invalidParams = Self(rawValue: -32602)
    /// A fault inside the daemon; the details are in its log.
    public static let internalError = Self(rawValue: -32603)

    // livegate codes.
    /// The token does not exist on this connection (never did, was invalidated, or belongs to another connection).
    public static let unknownToken = Self(rawValue: -32001)
    /// The peer's credentials do not allow this method.
    public static let notPermitted = Self(rawValue: -32002)
    /// A limit was exceeded (frame size, tokens, rate, outbound buffer); `data.limit` names it.
    public static let limitExceeded = Self(rawValue: -32003)
    /// The cloud could not be reached or refused the daemon's session; retry later.
    public static let cloudUnavailable = Self(rawValue: -32004)
    /// A write's `ifVersion` did not match; `data.currentVersion` is the stored version.
    public static let versionConflict = Self(rawValue: -32005)
    /// The object does not exist.
    public static let notFound = Self(rawValue: -32006)
    /// The client asked for a protocol version this daemon does not speak.
    public static let unsupportedProtocol = Self(rawValue: -32007)
    /// The daemon's state directory failed (`data.reason`: `full`, `readOnly`, `ioError`, `damaged`); a write
    /// was not queued. Reads go on from memory and the cloud.
    public static let storageFailure = Self(rawValue: -32008)
}
