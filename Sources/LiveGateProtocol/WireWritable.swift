// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// A value that writes its wire form itself, member by member with ``JSONWriter``: the same bytes as its
/// `Encodable` conformance through ``WireJSON/bytes(_:)`` (the tests check that equality), without the
/// encoder's tree of boxed values. For what the daemon answers thousands of times a second (an observation's
/// token: a desktop app opening a list of thousands of items sends as many requests at once).
public protocol WireWritable: Encodable, Sendable {
    /// Writes the value; throws only for a number that is not finite (as the encoder refuses it).
    func write(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber)
}

extension RequestID {
    /// The id as ``encode(to:)`` encodes it.
    public func write(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber) {
        switch self {
        case .number(let value): writer.write(value)
        case .string(let value): writer.write(value)
        case .exact(let value): writer.write(value)
        case .null: writer.writeNull()
        }
    }
}

extension TokenResult: WireWritable {
    public func write(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber) {
        writer.beginObject()
        writer.writeKey(literal: "token", first: true)
        writer.write(token)
        writer.endObject()
    }
}

extension RPCResponse where Result: WireWritable {
    /// `{"id":…,"jsonrpc":"2.0","result":…}`, keys in the sorted order the encoder writes them in.
    public func write(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber) {
        writer.beginObject()
        writer.writeKey(literal: "id", first: true)
        try id.write(into: &writer)
        writer.writeKey(literal: "jsonrpc")
        writer.write(jsonrpc)
        writer.writeKey(literal: "result")
        try result.write(into: &writer)
        writer.endObject()
    }
}

extension WireJSON {
    /// `response` encoded, as bytes: written directly (see ``WireWritable``).
    public static func bytes<Result: WireWritable>(_ response: RPCResponse<Result>) throws -> [UInt8] {
        var writer = JSONWriter(capacity: 64)
        do {
            try response.write(into: &writer)
        } catch {
            // Not finite: the encoder says why, as for any other value.
            return [UInt8](try foundationEncoded(response))
        }
        return writer.bytes
    }
}
