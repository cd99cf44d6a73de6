// Licensed under the Apache License, Version 2.0.

import LiveJSON
import NIOCore

import struct Foundation.Data
import struct Foundation.Decimal
import class Foundation.JSONEncoder
import struct Foundation.URL

/// The wire shape that lets the daemon encode a notification once and send it to many tokens.
///
/// A notification is one ordinary JSON-RPC 2.0 notification line:
///
///     {"jsonrpc":"2.0","method":"object.changed","params":{"token":7,"dataStatus":"fresh",...}}\n
///     └──────────────── prefix (per token) ───────────────────────┘└──────── body (shared) ───────┘
///
/// The *prefix* ends just after the token and its comma; it depends only on the method and the token, so
/// the daemon builds it once when the token is created. The *body* is the rest of `params`' members followed
/// by `}}\n`; it is encoded once per change and the same bytes are written after every token's prefix.
/// Clients need not know any of this: each line is a complete JSON object with `params.token` first.
public enum NotificationFrame {
    /// `{"jsonrpc":"2.0","method":"<method>","params":{"token":<token>,`
    public static func prefix(method: String, token: Int64, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 64 + method.utf8.count)
        writePrefix(method: method, token: token, to: &buffer)
        return buffer
    }

    /// Writes ``prefix(method:token:allocator:)``'s bytes at the end of `buffer` (many tokens' prefixes in one
    /// buffer: the daemon's `TokenPrefixes`).
    public static func writePrefix(method: String, token: Int64, to buffer: inout ByteBuffer) {
        buffer.writeString("{\"jsonrpc\":\"2.0\",\"method\":\"")
        buffer.writeString(method)
        buffer.writeString("\",\"params\":{\"token\":")
        buffer.writeString(String(token))
        buffer.writeString(",")
    }

    /// The most bytes a prefix of `method` takes (a token of 20 characters, `Int64.min`).
    public static func maximumPrefixBytes(method: String) -> Int { 48 + method.utf8.count + 20 }

    /// Encodes `body` (which must encode as a non-empty JSON object) as the shared part of a notification.
    public static func body(_ body: some Encodable) throws -> ByteBuffer {
        try encodedBody(body)
    }

    private static func encodedBody(_ body: some Encodable) throws -> ByteBuffer {
        let bytes = try WireJSON.bytes(body)
        // `bytes` is `{...}`: drop the opening brace, close both `params` and the message, end the line.
        guard bytes.count > 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else {
            throw EncodingError.invalidValue(
                body,
                .init(codingPath: [], debugDescription: "a notification body must be a non-empty JSON object")
            )
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(bytes.count + 2)
        buffer.writeBytes(bytes.dropFirst())
        buffer.writeString("}\n")
        return buffer
    }

    /// ``body(_:)`` of an `object.changed` (one per cloud event, the daemon's hot path), written member by
    /// member instead of through `Encodable`: the same bytes (the tests compare them). A body with an error,
    /// or data holding a number JSON cannot write, goes through ``body(_:)``.
    public static func body(_ body: ObjectChangedBody) throws -> ByteBuffer {
        guard body.error == nil, body.unchanged != true else { return try encodedBody(body) }
        // The members in the order `SortedJSONEncoder` sorts them.
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.writeKey(literal: "dataStatus", first: true)
        writer.write(body.dataStatus.rawValue)
        writer.writeKey(literal: "loadingStatus")
        writer.write(body.loadingStatus.rawValue)
        if body.pendingWrites == true {
            writer.writeKey(literal: "pendingWrites")
            writer.write(true)
        }
        if body.resync == true {
            writer.writeKey(literal: "resync")
            writer.write(true)
        }
        writer.writeKey(literal: "snapshot")
        if let snapshot = body.snapshot {
            writer.beginObject()
            writer.writeKey(literal: "collection", first: true)
            writer.write(snapshot.collection)
            writer.writeKey(literal: "data")
            do {
                try writer.write(snapshot.data)
            } catch {
                return try encodedBody(body)
            }
            writer.writeKey(literal: "id")
            writer.write(snapshot.id)
            writer.writeKey(literal: "updatedAt")
            writer.write(snapshot.updatedAt)
            writer.writeKey(literal: "version")
            writer.write(snapshot.version)
            writer.endObject()
        } else {
            writer.writeNull()
        }
        writer.endObject()
        var buffer = ByteBuffer()
        buffer.reserveCapacity(writer.bytes.count + 1)
        buffer.writeBytes(writer.bytes.dropFirst())
        buffer.writeString("}\n")
        return buffer
    }

    /// A complete notification whose params carry no token (e.g. `connection.closing`).
    public static func standalone<Params: Encodable>(method: String, params: Params) throws -> ByteBuffer {
        try WireJSON.line(RPCNotification(method: method, params: params))
    }
}

/// A notification as encoded whole (those that carry no token).
public struct RPCNotification<Params: Encodable>: Encodable {
    public var jsonrpc = "2.0"
    public var method: String
    public var params: Params

    public init(method: String, params: Params) {
        self.method = method
        self.params = params
    }
}

/// The one JSON encoding of the local protocol: sorted keys, no escaped slashes, one line.
///
/// Written by ``SortedJSONEncoder`` (the same bytes as Foundation's `JSONEncoder` with `.sortedKeys` and
/// `.withoutEscapingSlashes`, faster); what it does not encode itself — a type `JSONEncoder` encodes in a way
/// of its own, a number that is not finite — goes to `JSONEncoder`, which encodes it or says why not.
public enum WireJSON {
    private static let encoder = SortedJSONEncoder(refusing: [Data.self, URL.self, Decimal.self])

    /// `value` encoded, as bytes.
    public static func bytes(_ value: some Encodable) throws -> [UInt8] {
        do {
            return try encoder.encode(value)
        } catch is SortedJSONEncoder.Unsupported, is JSONWriter.NonFiniteNumber {
            return [UInt8](try foundationEncoded(value))
        }
    }

    public static func encode(_ value: some Encodable) throws -> Data {
        Data(try bytes(value))
    }

    /// `value` encoded by Foundation's `JSONEncoder`, configured as the protocol says.
    package static func foundationEncoded(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    /// `value` encoded, followed by `\n`.
    public static func line(_ value: some Encodable) throws -> ByteBuffer {
        let bytes = try bytes(value)
        var buffer = ByteBuffer()
        buffer.reserveCapacity(bytes.count + 1)
        buffer.writeBytes(bytes)
        buffer.writeInteger(UInt8(ascii: "\n"))
        return buffer
    }
}
