// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// An `object.observe` request read straight from its frame's bytes, member by member, with no tree of
/// dictionaries built, hashed and looked up for the request and its params: a client opening a list of thousands
/// of items sends thousands of these at once.
///
/// It reads only the common shape: one request object with `"jsonrpc":"2.0"`, an `id` (a number, a string or
/// `null`), `"method":"object.observe"` and `params` with `collection` and `id` strings and, if any, `once`,
/// `policy` and `sinceVersion` as the method takes them. Anything else (a batch, another method, a member it does
/// not know or given twice, `fields`, an escaped name, a type it does not expect, an integer beyond 2^53, text that
/// is not JSON) gives `nil`, and the frame goes the general way (``JSONValue`` parsed, ``RPCRequestEnvelope``,
/// ``ObjectObserveParams``), which also words every error. Where both read a frame they read the same request
/// (the tests check it over random frames).
public struct ObjectObserveRequest: Sendable, Equatable {
    public var id: RequestID
    public var params: ObjectObserveParams

    public init(id: RequestID, params: ObjectObserveParams) {
        self.id = id
        self.params = params
    }

    public init?(frame bytes: UnsafeRawBufferPointer) {
        guard let read = JSONReader.read(bytes: bytes, Self.read) else { return nil }
        self = read
    }

    private static func read(_ reader: inout JSONReader) throws(JSONParseError) -> ObjectObserveRequest? {
        guard try reader.enterObject() else { return nil }
        var seen = Members()
        var id: RequestID?
        var params: ObjectObserveParams?
        repeat {
            guard let name = try reader.name() else { return nil }
            if JSONReader.name(name, is: "jsonrpc") {
                guard seen.add(.jsonrpc), try reader.string() == "2.0" else { return nil }
            } else if JSONReader.name(name, is: "id") {
                guard seen.add(.id) else { return nil }
                id = try readID(&reader)
            } else if JSONReader.name(name, is: "method") {
                guard seen.add(.method), try reader.string() == Method.objectObserve else { return nil }
            } else if JSONReader.name(name, is: "params") {
                guard seen.add(.params), let read = try readParams(&reader) else { return nil }
                params = read
            } else {
                return nil
            }
        } while try reader.nextMember()
        try reader.end()
        guard seen.contains([.jsonrpc, .method]), let id, let params else { return nil }
        return ObjectObserveRequest(id: id, params: params)
    }

    /// As ``RequestID/init(_:)`` takes a ``JSONValue``.
    private static func readID(_ reader: inout JSONReader) throws(JSONParseError) -> RequestID {
        switch reader.peek() {
        case UInt8(ascii: "\""): return .string(try reader.string())
        case UInt8(ascii: "n"):
            _ = try reader.null()
            return .null
        default: return RequestID(number: try reader.number())
        }
    }

    /// As ``ObjectObserveParams/init(reading:)`` reads them, for the members it takes here; `nil` for the rest (a
    /// value of another type, `null` included, throws: the read gives `nil`).
    private static func readParams(_ reader: inout JSONReader) throws(JSONParseError) -> ObjectObserveParams? {
        guard try reader.enterObject() else { return nil }
        var seen = Members()
        var collection: String?
        var id: String?
        var once: Bool?
        var policy: ObservePolicy?
        var sinceVersion: Int64?
        repeat {
            guard let name = try reader.name() else { return nil }
            if JSONReader.name(name, is: "collection") {
                guard seen.add(.collection) else { return nil }
                collection = try reader.string()
            } else if JSONReader.name(name, is: "id") {
                guard seen.add(.id) else { return nil }
                id = try reader.string()
            } else if JSONReader.name(name, is: "once") {
                guard seen.add(.once) else { return nil }
                once = try reader.bool()
            } else if JSONReader.name(name, is: "policy") {
                guard seen.add(.policy), let read = ObservePolicy(rawValue: try reader.string()) else { return nil }
                policy = read
            } else if JSONReader.name(name, is: "sinceVersion") {
                guard seen.add(.sinceVersion), let version = ObjectObserveParams.version(try reader.number()) else { return nil }
                sinceVersion = version
            } else {
                return nil
            }
        } while try reader.nextMember()
        guard let collection, let id else { return nil }
        return ObjectObserveParams(collection: collection, id: id, once: once, policy: policy, sinceVersion: sinceVersion)
    }

    /// The members read so far (each may come once).
    private struct Members: OptionSet {
        let rawValue: UInt16
        static let jsonrpc = Members(rawValue: 1 << 0)
        static let id = Members(rawValue: 1 << 1)
        static let method = Members(rawValue: 1 << 2)
        static let params = Members(rawValue: 1 << 3)
        static let collection = Members(rawValue: 1 << 4)
        static let once = Members(rawValue: 1 << 5)
        static let policy = Members(rawValue: 1 << 6)
        static let sinceVersion = Members(rawValue: 1 << 7)

        /// Adds `member`: `false` when it was there already.
        mutating func add(_ member: Members) -> Bool { insert(member).inserted }
    }
}
