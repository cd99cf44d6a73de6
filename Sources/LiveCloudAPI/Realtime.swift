// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON

/// A realtime topic: what a subscriber asks to hear about. Its string form goes on the wire.
public enum Topic: Hashable, Sendable, CustomStringConvertible {
    /// Every change of one object: `object:<collection>/<id>`.
    case object(EntityKey)
    /// Every change of every object of one collection: `collection:<collection>`. Query results are kept
    /// current from it (the client evaluates the query on each change).
    case collection(String)
    /// Every change of an object of one collection that matches the filter after the write, or did before
    /// it (so a subscriber sees objects leave): `query:<collection>?<filter>`, the filter a JSON object of
    /// top-level field → string, number, boolean or null (`CollectionQuery`'s `where`). Its wire form is
    /// canonical (compact, keys sorted), which is how events name it.
    case query(String, where: [String: JSONValue])
    /// Every message sent to one user on one stream: `stream:<stream>/<user>`. Listening is subscribing to
    /// one's own; following a user is subscribing to theirs (what they post, they send to themselves).
    case stream(String, user: String)

    public var description: String {
        switch self {
        case .object(let key): "object:\(key.collection)/\(key.id)"
        case .collection(let collection): "collection:\(collection)"
        case .query(let collection, let filter): "query:\(collection)?\(Self.canonicalText(filter))"
        case .stream(let stream, let user): "stream:\(stream)/\(user)"
        }
    }

    private static func canonicalText(_ filter: [String: JSONValue]) -> String {
        (try? String(decoding: SortedJSONEncoder().encode(filter), as: UTF8.self)) ?? "{}"
    }

    /// The query a `query` topic's filter makes (no order: events carry no position).
    public var filterQuery: CollectionQuery? {
        guard case .query(let collection, let filter) = self else { return nil }
        return CollectionQuery(collection: collection, where: filter)
    }

    /// The collection the topic's changes belong to (`nil` for a stream).
    public var collection: String? {
        switch self {
        case .object(let key): key.collection
        case .collection(let collection), .query(let collection, _): collection
        case .stream: nil
        }
    }

    /// Parses the wire form; `nil` when it names no known kind of topic or has invalid names.
    public init?(_ string: String) {
        // An object's topic first (nearly every realtime event names one), read on the UTF-8 bytes: no split
        // into an array, no `Character` work.
        let utf8 = string.utf8
        if utf8.starts(with: "object:".utf8) {
            let rest = utf8.dropFirst("object:".utf8.count)
            // A second `/` is in the id, which `isValidName` refuses.
            guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
            let key = EntityKey(collection: String(Substring(rest[..<slash])), id: String(Substring(rest[utf8.index(after: slash)...])))
            guard EntityKey.isValidName(key.collection), EntityKey.isValidName(key.id) else { return nil }
            self = .object(key)
            return
        }
        if string.hasPrefix("stream:") {
            let parts = string.dropFirst("stream:".count).split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, EntityKey.isValidName(String(parts[0])), EntityKey.isValidName(String(parts[1])) else {
                return nil
            }
            self = .stream(String(parts[0]), user: String(parts[1]))
            return
        }
        if string.hasPrefix("query:") {
            let rest = string.dropFirst("query:".count)
            guard let mark = rest.firstIndex(of: "?"),
                let filter = try? CloudJSON.decode([String: JSONValue].self, from: rest[rest.index(after: mark)...].utf8),
                CollectionQuery(collection: String(rest[..<mark]), where: filter).problem == nil
            else { return nil }
            self = .query(String(rest[..<mark]), where: filter)
            return
        }
        if string.hasPrefix("collection:") {
            let name = String(string.dropFirst("collection:".count))
            guard EntityKey.isValidName(name) else { return nil }
            self = .collection(name)
            return
        }
        return nil
    }
}

extension Topic: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        guard let topic = Topic(string) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown topic \(string)")
        }
        self = topic
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A message from a realtime client to the cloud (one JSON object per WebSocket text message).
public struct RealtimeClientMessage: Codable, Sendable, Equatable {
    public enum Operation: String, Codable, Sendable {
        case subscribe, unsubscribe
    }

    public var op: Operation
    /// Chosen by the client; the server's `ack` or `error` carries it back.
    public var ref: Int64
    public var topic: Topic
    /// `subscribe` only: the last event sequence number the client saw on this topic. The server sends
    /// every later event of the topic, in order, before live ones; or, when its log no longer reaches back
    /// that far, says so with `resync: true` in the ack.
    public var since: Int64?

    public init(op: Operation, ref: Int64, topic: Topic, since: Int64? = nil) {
        self.op = op
        self.ref = ref
        self.topic = topic
        self.since = since
    }
}

/// Many requests in one realtime message: `{"op":"batch","requests":[…]}`, 1 to ``maximumRequests`` of
/// them. The server handles them in order, each as if it had come alone: every one gets its own `ack` or
/// `error` with its own `ref`. A client subscribing to many topics at once (a burst of new observations, a
/// reconnection) sends one message, not one per topic.
public struct RealtimeClientBatch: Codable, Sendable, Equatable {
    public static let maximumRequests = 1000
    /// The largest realtime message (and frame) the cloud reads from a client, in bytes.
    public static let maximumBytes = 1 << 20
    /// Always `batch`.
    public var op: String
    public var requests: [RealtimeClientMessage]

    public init(requests: [RealtimeClientMessage]) {
        self.op = "batch"
        self.requests = requests
    }
}

/// What a realtime client sends: one request, or a batch of them.
public enum RealtimeClientFrame: Decodable, Sendable, Equatable {
    case single(RealtimeClientMessage)
    case batch([RealtimeClientMessage])

    private enum Keys: String, CodingKey { case op }

    public init(from decoder: any Decoder) throws {
        let op = try decoder.container(keyedBy: Keys.self).decode(String.self, forKey: .op)
        if op == "batch" {
            self = .batch(try RealtimeClientBatch(from: decoder).requests)
        } else {
            self = .single(try RealtimeClientMessage(from: decoder))
        }
    }
}

/// A message from the cloud to a realtime client.
public struct RealtimeServerMessage: Codable, Sendable, Equatable {
    public enum Operation: String, Codable, Sendable {
        /// The request `ref` succeeded.
        case ack
        /// The request `ref` failed, or (without `ref`) the connection is about to close.
        case error
        /// A change of an entity, or a stream message, on a subscribed topic.
        case event
    }

    public var op: Operation
    public var ref: Int64?
    /// On `error`.
    public var code: CloudErrorCode?
    public var message: String?
    /// On `event`: the global sequence number of the write (strictly increasing across the server).
    public var seq: Int64?
    public var topic: Topic?
    /// On `event` of an object or collection topic: the entity as stored after the write.
    public var entity: Entity?
    /// On `event` of an object, collection or query topic: the object's data before the write; absent when
    /// it did not exist (or was deleted). A subscriber holding part of a query's result counts with it
    /// whether the write made the object join or leave the result.
    public var previous: JSONValue?
    /// On `event` of a stream topic: the message.
    public var streamMessage: StreamMessage?
    /// On a `subscribe`'s `ack`: true when `since` was older than the event log keeps (or newer than any
    /// event): continuity cannot be proven, so the client must fetch what the topic covers again.
    public var resync: Bool?
    /// On a resuming `subscribe`'s ack (with `since`, continuity proven): how many events of the topic follow
    /// the ack as its replay. After them the subscriber has every event of the topic up to the ack's `seq`.
    public var replayed: Int?

    public init(
        op: Operation,
        ref: Int64? = nil,
        code: CloudErrorCode? = nil,
        message: String? = nil,
        seq: Int64? = nil,
        topic: Topic? = nil,
        entity: Entity? = nil,
        previous: JSONValue? = nil,
        streamMessage: StreamMessage? = nil,
        resync: Bool? = nil,
        replayed: Int? = nil
    ) {
        self.op = op
        self.ref = ref
        self.code = code
        self.message = message
        self.seq = seq
        self.topic = topic
        self.entity = entity
        self.previous = previous
        self.streamMessage = streamMessage
        self.resync = resync
        self.replayed = replayed
    }

    /// An acknowledgement; for a `subscribe`, `seq` is the last event sequence number at subscription time.
    public static func ack(ref: Int64, seq: Int64? = nil, resync: Bool? = nil, replayed: Int? = nil) -> Self {
        Self(op: .ack, ref: ref, seq: seq, resync: resync, replayed: replayed)
    }
    public static func error(ref: Int64?, code: CloudErrorCode, message: String, topic: Topic? = nil) -> Self {
        Self(op: .error, ref: ref, code: code, message: message, topic: topic)
    }
    public static func event(seq: Int64, topic: Topic, entity: Entity, previous: JSONValue? = nil) -> Self {
        Self(op: .event, seq: seq, topic: topic, entity: entity, previous: previous)
    }
    public static func event(seq: Int64, topic: Topic, message: StreamMessage) -> Self {
        Self(op: .event, seq: seq, topic: topic, streamMessage: message)
    }
}
