// Licensed under the Apache License, Version 2.0.

import Crypto
import Foundation
import LiveCloudAPI
import LiveJSON

/// Where the cloud keeps entities, streams and the durable event log: one SQLite file (`SQLiteStore`, the
/// default) or a PostgreSQL database that several instances share (`PostgresStore`).
///
/// Both keep the same promises, which the routes and the realtime hub rely on:
/// - every write and every stream message appends an event with a global sequence number in the same
///   transaction;
/// - committed events reach the store's `onCommit` once each, in sequence order, and only after the commit
///   (so subscribers never see a write that was rolled back, nor two events out of order) — for PostgreSQL
///   that includes the events other instances commit;
/// - the log keeps at least the last `eventRetention` events.
protocol CloudStore: Sendable {
    /// Whether other instances may use the same storage (PostgreSQL): then they may revoke a token this one
    /// honoured, and only the store knows. A SQLite file has one instance.
    var isShared: Bool { get }

    /// Whether every committed event is published (`onCommit`) before the write that made it is answered (SQLite,
    /// which publishes right after each commit). PostgreSQL's are published once its event pump reads them
    /// from the log, a moment after: a subscription first waits for the pump to reach the log's head
    /// (``RealtimeHub/published(through:within:)``).
    var publishesAsItCommits: Bool { get }

    /// Object writes decided and the transactions they shared, since the store opened (``GroupCommit``).
    var writesCommitted: (transactions: Int, writes: Int) { get }

    /// The sequence number of the last event written (0 when none was).
    func lastSeq() async throws -> Int64

    /// The events of a topic (one object, a whole collection, or a user's messages on a stream) with
    /// `after < seq <= upTo`, in order, and the oldest sequence number the log still holds (`nil` when it holds none).
    func events(of topic: Topic, after: Int64, upTo: Int64) async throws -> (events: [(seq: Int64, event: LoggedEvent)], oldest: Int64?)

    /// One page of a query's result, with the total count and the cursors around it (in the order
    /// `CollectionQuery` specifies, which each store's SQL must follow exactly).
    func query(_ query: CollectionQuery, page: PageRequest, limit: Int) async throws -> QueryPage

    /// The entity, or its tombstone; `nil` when it never existed.
    func get(_ key: EntityKey) async throws -> Entity?

    /// Many entities (or tombstones) read in one snapshot, by key (keys that never existed are absent), and the
    /// event log's last sequence number as of that snapshot (`nil` while the log is empty): the read reflects
    /// every write up to it and none after.
    func get(_ keys: [EntityKey]) async throws -> (found: [EntityKey: Entity], seq: Int64?)

    /// Writes one object; with `ifVersion`, only if the stored version is exactly that (0: "does not
    /// exist"). Versions grow by one with every write, deletions and re-creations included. With an
    /// `idempotency` key the store first looks for a write it already applied under that key (kept 24 hours),
    /// and answers with that write's outcome instead of writing again.
    ///
    /// With `confirmingGrant` (a shared store: the hash of the access token the write came with, whose grant
    /// the instance had in memory), the write's transaction first checks that the grant is still issued and
    /// unexpired, and throws ``CloudHTTPError/unauthenticated`` or ``CloudHTTPError/tokenExpired`` instead of
    /// writing if not: a token revoked or expired by another instance writes nothing once that committed.
    func write(
        _ key: EntityKey,
        _ change: EntityChange,
        ifVersion: Int64?,
        idempotency: IdempotencyKey?,
        confirmingGrant: String?
    ) async throws -> WriteOutcome

    /// Creates the stream; `false` when it existed already.
    func createStream(_ name: String) async throws -> Bool
    func streamNames() async throws -> [String]
    /// The user's ACL on the stream (empty when none was granted); `nil` when there is no such stream.
    func acl(stream: String, user: String) async throws -> StreamACL?
    /// Replaces the user's ACL on the stream; `false` when there is no such stream.
    func setACL(_ acl: StreamACL, stream: String, user: String) async throws -> Bool
    /// Appends a message from `from` to `to` on the stream, if the recipient's ACL lets the sender publish
    /// to them; the check and the append are one transaction.
    func send(_ message: JSONValue, stream: String, from: String, to: String) async throws -> StreamSendOutcome

    /// Stores the grants of a new token pair, each under its token's hash (and drops expired ones).
    func saveTokens(_ grants: [(hash: String, grant: TokenGrant)]) async throws
    /// The grant of a token of that kind, expired or not; `nil` when there is none (never issued, used up, revoked).
    func tokenGrant(_ hash: String, kind: TokenGrant.Kind) async throws -> TokenGrant?
    /// Removes a refresh token and returns its grant (a refresh token is used once), `nil` when there was none.
    func takeRefreshToken(_ hash: String) async throws -> TokenGrant?
    /// Removes an access token and the refresh token issued with it.
    func revokeAccessToken(_ hash: String) async throws
    /// Fault injection: every access token expires now (refresh tokens stay valid).
    func expireAccessTokens() async throws
}

/// What the event log holds: a write of an entity (with the data it had before, if it existed), or a
/// message sent on a stream.
///
/// A write's log row has the entity as its `entity` text and the data before the write as `previous` (null
/// when the object did not exist or was deleted). A stream message's log row has `collection` =
/// `$stream/<stream>` (never a valid collection name), `id` = the recipient, `version` = 0 and the message as
/// its `entity` text.
package enum LoggedEvent: Sendable, Equatable {
    case entity(Entity, previous: JSONValue?)
    case message(StreamMessage)
    /// A user's ACL on a stream was replaced: subscriptions it no longer allows end (on every instance).
    /// Its log row has `collection` = `$acl/<stream>`, `id` = the user, the ACL as its `entity` text.
    case aclChanged(stream: String, user: String, acl: StreamACL)

    /// The topics that hear of it, but for query topics (see ``concerns(_:)``).
    var topics: [Topic] {
        switch self {
        case .entity(let entity, _): [.object(entity.key), .collection(entity.collection)]
        case .message(let message): [.stream(message.stream, user: message.to)]
        case .aclChanged: []
        }
    }

    /// Whether a query topic hears of it: a write in its collection after which the object matches the
    /// filter, or before which it did (so subscribers see objects leave, deletions included).
    func concerns(_ topic: Topic) -> Bool {
        guard case .entity(let entity, let previous) = self, let query = topic.filterQuery else { return false }
        if query.matches(entity) { return true }
        guard let previous else { return false }
        var before = entity
        before.data = previous
        before.deleted = false
        return query.matches(before)
    }

    func serverMessage(seq: Int64, topic: Topic) -> RealtimeServerMessage {
        switch self {
        case .entity(let entity, let previous): .event(seq: seq, topic: topic, entity: entity, previous: previous)
        case .message(let message): .event(seq: seq, topic: topic, message: message)
        case .aclChanged(let stream, let user, _):
            .error(ref: nil, code: .forbidden, message: "the access list of \(user) on \(stream) changed", topic: topic)
        }
    }

    /// The log row's `collection` for messages of a stream.
    static func logCollection(ofStream stream: String) -> String { "$stream/" + stream }

    /// The log row's `collection` for ACL changes on a stream.
    static func logCollection(ofACLsOf stream: String) -> String { "$acl/" + stream }

    /// Decodes a log row: its `collection` says whether `text` is a stream message, an ACL or an entity.
    init(collection: String, id: String, text: String, previous: String?) throws {
        if collection.hasPrefix("$acl/") {
            self = .aclChanged(
                stream: String(collection.dropFirst("$acl/".count)),
                user: id,
                acl: try JSONDecoder().decode(StreamACL.self, from: Data(text.utf8))
            )
        } else if collection.hasPrefix("$stream/") {
            self = .message(try JSONDecoder().decode(StreamMessage.self, from: Data(text.utf8)))
        } else {
            self = .entity(
                try CloudJSON.decode(Entity.self, from: text),
                previous: try previous.map(StoreText.value)
            )
        }
    }

    /// The text of a write's `previous` column: the data the object had, if it existed and was not deleted.
    static func previousText(of current: Entity?) throws -> String? {
        guard let current, !current.deleted else { return nil }
        return try StoreText.encode(current.data)
    }
}

extension Topic {
    /// Which log rows hold the topic's events: those of its `collections` and, for an object or a stream's
    /// recipient, of its `id` (a query topic's are those of its collection that ``LoggedEvent/concerns(_:)``
    /// it; a stream topic's include the recipient's ACL changes, which are not sent but decide continuity).
    var logRows: (collections: [String], id: String?) {
        switch self {
        case .object(let key): ([key.collection], key.id)
        case .collection(let collection), .query(let collection, _): ([collection], nil)
        case .stream(let stream, let user):
            ([LoggedEvent.logCollection(ofStream: stream), LoggedEvent.logCollection(ofACLsOf: stream)], user)
        }
    }
}

extension PageRequest {
    /// How a store reads the page: along the query's order (`forward`) or against it, and from beyond which
    /// position (`nil` for the first or last page). Rows past `beyond` are those `after: forward` of it.
    var reading: (forward: Bool, beyond: QueryPosition?) {
        switch self {
        case .first: (true, nil)
        case .last: (false, nil)
        case .after(let position): (true, position)
        case .before(let position): (false, position)
        }
    }
}

/// What a write does to an object.
enum EntityChange: Sendable {
    /// Create or replace the data.
    case replace(JSONValue)
    /// Merge a JSON merge patch (RFC 7386) into the existing data.
    case merge(JSONValue)
    /// Delete: the entity becomes a tombstone (no data, `deleted: true`) with the next version.
    case delete

    /// What a write decides, given the stored row.
    enum Decision: Sendable {
        case store(Entity)
        case refuse(WriteOutcome)
    }

    /// What the change makes of the stored row `current` (an entity, a tombstone or nothing): the entity to
    /// store, or the outcome that refuses the write. Both stores decide through here, inside their write
    /// transaction.
    func apply(to current: Entity?, key: EntityKey, ifVersion: Int64?, now: String) -> Decision {
        let existing = current.flatMap { $0.deleted ? nil : $0 }
        if let ifVersion, ifVersion != (existing?.version ?? 0) {
            return .refuse(.conflict(currentVersion: existing?.version ?? 0))
        }
        let data: JSONValue
        switch self {
        case .replace(let replacement):
            data = replacement
        case .merge(let patch):
            guard let existing else { return .refuse(.notFound) }
            data = existing.data.merging(patch: patch)
        case .delete:
            guard existing != nil else { return .refuse(.notFound) }
            data = .object([:])
        }
        let deleted: Bool
        if case .delete = self { deleted = true } else { deleted = false }
        return .store(
            Entity(
                collection: key.collection,
                id: key.id,
                version: (current?.version ?? 0) + 1,
                data: data,
                createdAt: existing?.createdAt ?? now,
                updatedAt: now,
                deleted: deleted
            )
        )
    }

    /// The outcome of a write that stored `entity`, which replaced `current`.
    static func outcome(storing entity: Entity, over current: Entity?) -> WriteOutcome {
        if entity.deleted { return .deleted(entity) }
        return current == nil || current?.deleted == true ? .created(entity) : .updated(entity)
    }
}

/// A client's name for one write (`Idempotency-Key`), scoped to its user: a retried request with the same
/// key is answered with the first one's outcome, so a write whose answer was lost is applied once.
struct IdempotencyKey: Sendable, Hashable {
    let user: String
    let key: String
    /// The request the key was sent with (``fingerprint(method:target:body:)``); not part of the key's identity: the
    /// same key with another fingerprint is the key reused. `nil` for keys remembered before fingerprints were.
    var fingerprint: String? = nil

    static func == (left: IdempotencyKey, right: IdempotencyKey) -> Bool { left.user == right.user && left.key == right.key }

    func hash(into hasher: inout Hasher) {
        hasher.combine(user)
        hasher.combine(key)
    }

    /// Whether a write remembered with `remembered` as its fingerprint was this request (a key remembered
    /// without one is taken as this request, as before fingerprints).
    func isSameRequest(as remembered: String?) -> Bool {
        remembered == nil || fingerprint == nil || remembered == fingerprint
    }

    /// A request's fingerprint (the Idempotency-Key draft's): SHA-256 of its method, its target and its body's
    /// value written in livegate's one form (``StoreText``), so a body written with other spacing, member
    /// order or number forms (`1E6`, `1000000.0`) is the same request.
    static func fingerprint(method: String, target: String, body: String) -> String {
        SHA256.hash(data: Array("\(method) \(target)\n\(body)".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// How long an applied key is remembered.
    static let retentionMilliseconds: Int64 = 24 * 3600 * 1000

    /// 1-128 characters of `A-Z a-z 0-9 _ - . :`.
    static func isValid(_ key: String) -> Bool {
        (1...128).contains(key.utf8.count)
            && key.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F || byte == 0x2D
                    || byte == 0x2E || byte == 0x3A
            }
    }

    /// The outcome a remembered write answers with: the entity it stored, as it stored it.
    static func replayed(_ entity: Entity, outcome: String) -> WriteOutcome {
        switch outcome {
        case "created": .created(entity)
        case "deleted": .deleted(entity)
        default: .updated(entity)
        }
    }
}

extension WriteOutcome {
    /// The stored entity and the outcome's name, for a write that stored one.
    var applied: (entity: Entity, outcome: String)? {
        switch self {
        case .created(let entity): (entity, "created")
        case .updated(let entity): (entity, "updated")
        case .deleted(let entity): (entity, "deleted")
        case .notFound, .conflict, .keyReused: nil
        }
    }
}

package enum WriteOutcome: Sendable {
    case created(Entity)
    case updated(Entity)
    case deleted(Entity)
    /// `merge` or `delete` of an object that does not exist (or is already deleted).
    case notFound
    case conflict(currentVersion: Int64)
    /// The `Idempotency-Key` was used for a write of another object already.
    case keyReused(String, by: EntityKey)
}

enum StreamSendOutcome: Sendable, Equatable {
    case sent(SentStreamMessage)
    case noStream
    /// The sender is not among the recipient's publishers.
    case forbidden
}

/// Encodings both stores write.
package enum StoreText {
    /// JSON with sorted keys, as stored and as sent.
    static func encode(_ value: some Encodable) throws -> String {
        String(decoding: try bytes(value), as: UTF8.self)
    }

    /// ``encode(_:)``'s bytes: LiveJSON's ``SortedJSONEncoder`` (the bytes `JSONEncoder` writes with sorted keys
    /// and unescaped slashes, several times faster: every write encodes its object twice and each topic's
    /// event once, on the store's one writer), or `JSONEncoder` itself for a type the former does not take.
    static func bytes(_ value: some Encodable) throws -> [UInt8] {
        do {
            return try sortedEncoder.encode(value)
        } catch is SortedJSONEncoder.Unsupported {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return Array(try encoder.encode(value))
        }
    }

    private static let sortedEncoder = SortedJSONEncoder(refusing: [Data.self, URL.self, Decimal.self])

    // The values every write encodes, written member by member (the same bytes: LiveCloudAPI's tests).

    static func encode(_ value: JSONValue) throws -> String {
        var writer = JSONWriter()
        try writer.write(value)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func encode(_ entity: Entity) throws -> String {
        String(decoding: try bytes(entity), as: UTF8.self)
    }

    static func bytes(_ entity: Entity) throws -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        try entity.write(into: &writer)
        return writer.bytes
    }

    static func encode(_ message: RealtimeServerMessage) throws -> String {
        var writer = JSONWriter(capacity: 512)
        guard try message.writeEntityEvent(into: &writer) else { return String(decoding: try bytes(message), as: UTF8.self) }
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// JSON text this cloud stored (``encode(_:)``), read back as a value (``CloudJSON/value(_:)``).
    static func value(_ text: String) throws -> JSONValue { try CloudJSON.value(text) }

    /// Milliseconds since 1970 (wall clock: instances on several machines compare it), for expiries and ages.
    static func milliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// RFC 3339 UTC with milliseconds, `2026-11-29T08:14:23.123Z`, by Foundation's ISO 8601 format style.
    /// Every write stamps its object, and the format style's calendar work was ~1 % of the cloud's request
    /// tasks: ``timestamp(_:)`` writes the same text by hand (`StoreTextTimestampTests` compares them).
    package static func foundationTimestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// ``foundationTimestamp(_:)``'s text for any date a clock gives, written by hand (a date before year 0 or
    /// past 9999 is left to Foundation).
    package static func timestamp(_ date: Date = Date()) -> String {
        // As Foundation counts: whole seconds since 2001 and the milliseconds of the rest, truncated.
        let sinceReference = date.timeIntervalSinceReferenceDate
        let wholeSeconds = sinceReference.rounded(.down)
        guard abs(wholeSeconds) < 1e15 else {
            return foundationTimestamp(date)
        }
        let millisecond = min(999, Int((sinceReference - wholeSeconds) * 1000))
        var seconds = time_t(Int64(wholeSeconds) + Int64(Date.timeIntervalBetween1970AndReferenceDate))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil, (0...9999).contains(Int(parts.tm_year) + 1900) else {
            return foundationTimestamp(date)
        }
        var bytes = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int, at offset: Int, digits: Int) {
            var value = value
            for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                bytes[index] = UInt8(48 + value % 10)
                value /= 10
            }
        }
        put(Int(parts.tm_year) + 1900, at: 0, digits: 4)
        bytes[4] = UInt8(ascii: "-")
        put(Int(parts.tm_mon) + 1, at: 5, digits: 2)
        bytes[7] = UInt8(ascii: "-")
        put(Int(parts.tm_mday), at: 8, digits: 2)
        bytes[10] = UInt8(ascii: "T")
        put(Int(parts.tm_hour), at: 11, digits: 2)
        bytes[13] = UInt8(ascii: ":")
        put(Int(parts.tm_min), at: 14, digits: 2)
        bytes[16] = UInt8(ascii: ":")
        put(Int(parts.tm_sec), at: 17, digits: 2)
        bytes[19] = UInt8(ascii: ".")
        put(millisecond, at: 20, digits: 3)
        bytes[23] = UInt8(ascii: "Z")
        return String(decoding: bytes, as: UTF8.self)
    }
}
