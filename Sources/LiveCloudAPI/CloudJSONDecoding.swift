// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON

/// Decoding what the cloud sends: LiveJSON's parser first (fast, and it bounds nesting), Foundation's
/// `JSONDecoder` for what it refuses (an integer beyond 2^53, which LiveJSON's decoder will not round).
///
/// A document nested deeper than ``JSONValue/maxParsingDepth`` never reaches `JSONDecoder`: it refuses such
/// a document too, and building its error for one that ends at that depth traps (Foundation's
/// `JSONError.SourceLocation`: `[` 513 times crashed the process; found by `scripts/fuzz realtime`).
public enum CloudJSON {
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        try decode(type, from: bytes) { _ in nil }
    }

    /// ``decode(_:from:)-(_,some Collection<UInt8>)``, with `direct` reading the parsed document first where it
    /// can (`nil`: `Decodable` reads it).
    static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>, direct: (JSONValue) -> T?) throws -> T {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: bytes)
        } catch  where error.isDepthLimit || error.isNumberLimit {
            // Not to `JSONDecoder`: it traps past the depth, and would round such a number.
            throw error
        } catch {
            return try JSONDecoder().decode(type, from: Data(bytes))
        }
        if let read = direct(value) { return read }
        do {
            return try JSONValueDecoder.decode(type, from: value)
        } catch {
            return try JSONDecoder().decode(type, from: Data(bytes))
        }
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decode(type, from: Array(text.utf8))
    }

    /// A JSON value as `JSONDecoder` reads one (what the cloud and the cache store as text): LiveJSON's parser,
    /// several times faster, or `JSONDecoder` for text the parser refuses, whose error it gives. Nesting beyond
    /// ``JSONValue/maxParsingDepth`` is refused: `JSONDecoder` traps on it.
    public static func value(_ text: String) throws -> JSONValue {
        try value(utf8: Array(text.utf8))
    }

    /// ``value(_:)`` of text given as its UTF-8 bytes (read in place: a cache row's column, say).
    public static func value(utf8 bytes: some Collection<UInt8>) throws -> JSONValue {
        try decode(JSONValue.self, from: bytes, direct: { $0 })
    }

    /// ``value(utf8:)-(some Collection<UInt8>)`` of bytes in place (a cache row's column, as SQLite holds it):
    /// parsed with no generic hop, what the parser refuses going the general way, with its errors.
    public static func value(utf8 bytes: UnsafeRawBufferPointer) throws -> JSONValue {
        if let value = try? JSONValue(parsing: bytes) { return value }
        return try decode(JSONValue.self, from: Array(bytes), direct: { $0 })
    }
}

extension CloudJSON {
    /// A realtime message from the cloud. An entity's event (nearly every message) is read from its text member by
    /// member (``RealtimeServerMessage/init(readingEntityEvent:)``: no dictionaries for the envelope and the
    /// entity). What that reader declines is parsed once (``decode(_:from:)-(_,String)``), an entity's event built
    /// straight from the parsed value instead of through `Decodable`, which cost as much again as the parse.
    /// Anything neither direct path takes exactly as `Decodable` would (a member missing or of another type, a
    /// number not an exact integer) goes the general way, with its errors.
    public static func decodeRealtimeMessage(from text: String) throws -> RealtimeServerMessage {
        if let event = RealtimeServerMessage(readingEntityEvent: text) { return event }
        return try decode(RealtimeServerMessage.self, from: Array(text.utf8), direct: RealtimeServerMessage.init(entityEvent:))
    }
}

extension RealtimeServerMessage {
    /// An `event` carrying an entity, read from its parsed document; `nil` for any other message, or one this
    /// path does not read exactly as `Decodable` does (left to it).
    package init?(entityEvent value: JSONValue) {
        guard case .object(let members) = value, case .string("event") = members["op"],
            let seq = members["seq"].flatMap(Self.exactInteger),
            case .string(let topicName) = members["topic"], let topic = Topic(topicName),
            let entity = members["entity"].flatMap(Entity.init(parsed:))
        else { return nil }
        // `op`, `seq`, `topic` and `entity` are there; any other member is counted.
        var read = 4
        var previous: JSONValue?
        if let member = members["previous"] {
            read += 1
            if member != .null { previous = member }
        }
        var ref: Int64?
        if let member = members["ref"] {
            read += 1
            if member != .null {
                guard let integer = Self.exactInteger(member) else { return nil }
                ref = integer
            }
        }
        // Members an entity's event never has: left to `Decodable`, which checks them (looked for only when there
        // are members besides those read).
        if members.count > read {
            for key in ["code", "message", "streamMessage", "resync", "replayed"] where members[key].map({ $0 != .null }) ?? false {
                return nil
            }
        }
        self.init(op: .event, ref: ref, seq: seq, topic: topic, entity: entity, previous: previous)
    }

    /// An integer as ``JSONValueDecoder`` takes one.
    static func exactInteger(_ value: JSONValue) -> Int64? {
        guard case .number(let number) = value else { return nil }
        return exactInteger(number)
    }
}

extension Entity {
    /// An entity from its parsed document, as `Decodable` reads it; `nil` when that would fail.
    init?(parsed value: JSONValue) {
        guard case .object(let members) = value,
            case .string(let collection) = members["collection"], case .string(let id) = members["id"],
            let version = members["version"].flatMap(RealtimeServerMessage.exactInteger),
            let data = members["data"],
            case .string(let createdAt) = members["createdAt"], case .string(let updatedAt) = members["updatedAt"],
            case .bool(let deleted) = members["deleted"]
        else { return nil }
        self.init(collection: collection, id: id, version: version, data: data, createdAt: createdAt, updatedAt: updatedAt, deleted: deleted)
    }
}
