// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON

/// A query over one collection: equality filters on top-level fields, and an order.
///
/// The cloud evaluates it in SQL; clients evaluate it in Swift (to place realtime changes in a result they
/// hold). Both follow the rules written here, which `Protocol/cloud/README.md` states normatively:
///
/// - `where`: every named top-level field must equal the given value. Values are strings, numbers, booleans
///   or `null` (`null` matches a missing field too); `true` never equals `1`; numbers are equal by their exact
///   value (`1` equals `1.0`; `9007199254740993` is not `9007199254740992`).
/// - Order: by the `sort` field, then by `id` (ascending, or descending with a descending sort). Values
///   compare as: missing or `null` first, then booleans and numbers by exact numeric value (`false` = 0,
///   `true` = 1), then strings, arrays and objects by their UTF-8 bytes (arrays and objects as compact JSON text with sorted keys).
///   Without `sort`, by `id` alone.
public struct CollectionQuery: Hashable, Sendable, Codable {
    public var collection: String
    /// Field name → the value it must equal.
    public var `where`: [String: JSONValue]
    public var sort: QuerySort?

    public init(collection: String, where filters: [String: JSONValue] = [:], sort: QuerySort? = nil) {
        self.collection = collection
        self.where = filters
        self.sort = sort
    }

    /// Field names usable in `where` and `sort`: 1-64 characters of `A-Z a-z 0-9 _`, not starting with a digit.
    public static func isValidField(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 64, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
        }
    }

    /// Why the query is not valid, or `nil` when it is.
    public var problem: String? {
        guard EntityKey.isValidName(collection) else {
            return "collection must be 1-128 characters of A-Z a-z 0-9 _ - . (got \"\(collection)\")"
        }
        for (field, value) in self.where {
            guard Self.isValidField(field) else {
                return "where: \"\(field)\" is not a field name (1-64 characters of A-Z a-z 0-9 _, not starting with a digit)"
            }
            switch value {
            case .array, .object: return "where: \"\(field)\" must be compared with a string, number, boolean or null"
            case .null, .bool, .number, .string: break
            }
        }
        if let sort, !Self.isValidField(sort.field) {
            return "sort: \"\(sort.field)\" is not a field name (1-64 characters of A-Z a-z 0-9 _, not starting with a digit)"
        }
        return nil
    }

    /// Whether the entity belongs to the result (a tombstone never does).
    public func matches(_ entity: Entity) -> Bool {
        guard !entity.deleted, entity.collection == collection else { return false }
        for (field, wanted) in self.where {
            let actual = entity.data[field] ?? .null
            switch (wanted, actual) {
            case (.null, .null): continue
            case (.bool(let a), .bool(let b)) where a == b: continue
            case (.number(let a), .number(let b)) where a.compareValue(b) == 0: continue
            // By code units, as both stores compare: Swift's == is canonical equivalence (NFC equals NFD).
            case (.string(let a), .string(let b)) where a.utf8.elementsEqual(b.utf8): continue
            default: return false
            }
        }
        return true
    }

    /// The position of `entity` in the order: compare two with ``areInIncreasingOrder(_:_:)``.
    public func position(of entity: Entity) -> QueryPosition {
        QueryPosition(value: sort.map { entity.data[$0.field] ?? .null } ?? .null, id: entity.id)
    }

    /// Whether `a` comes before `b` in the result.
    public func areInIncreasingOrder(_ a: QueryPosition, _ b: QueryPosition) -> Bool {
        let ascending = a.precedesAscending(b)
        return sort?.descending == true ? b.precedesAscending(a) : ascending
    }

    /// A stable text naming the query (sorted keys), for caches and statistics.
    public var canonicalText: String {
        (try? String(decoding: SortedJSONEncoder().encode(self), as: UTF8.self)) ?? collection
    }
}

/// The order of a query: one field, ascending unless `descending`; `id` breaks ties in the same direction.
public struct QuerySort: Hashable, Sendable, Codable {
    public var field: String
    public var descending: Bool

    public init(field: String, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        field = try container.decode(String.self, forKey: .field)
        descending = try container.decodeIfPresent(Bool.self, forKey: .descending) ?? false
    }
}

/// Where an item sits in a query's order: its sort value and its id. A page cursor is one of these.
public struct QueryPosition: Hashable, Sendable, Codable {
    /// The value of the sort field (`null` when missing, or when the query has no sort).
    public var value: JSONValue
    public var id: String

    public init(value: JSONValue, id: String) {
        self.value = value
        self.id = id
    }

    /// The rank of a value's kind in the order: null, then numbers and booleans, then text (strings, and
    /// arrays and objects as their compact JSON text, as SQLite's `json_extract` gives them).
    public var kindRank: Int {
        switch value {
        case .null: 0
        case .bool, .number: 1
        case .string, .array, .object: 2
        }
    }

    /// The number a number or boolean compares by, exactly (`false` = 0, `true` = 1); 0 for another kind.
    public var numeric: JSONNumber {
        switch value {
        case .bool(let b): b ? 1 : 0
        case .number(let n): n
        default: 0
        }
    }

    /// The text a string, array or object compares by (compact JSON with sorted keys for arrays and objects).
    public var textForOrdering: String {
        switch value {
        case .string(let s): return s
        case .array, .object:
            var writer = JSONWriter()
            try? writer.write(value)
            return String(decoding: writer.bytes, as: UTF8.self)
        default: return ""
        }
    }

    /// The ascending order of values then ids, as specified on ``CollectionQuery``.
    func precedesAscending(_ other: QueryPosition) -> Bool {
        if kindRank != other.kindRank { return kindRank < other.kindRank }
        switch kindRank {
        case 1:
            let ordered = numeric.compareValue(other.numeric)
            if ordered != 0 { return ordered < 0 }
        case 2:
            let (a, b) = (textForOrdering, other.textForOrdering)
            if !a.utf8.elementsEqual(b.utf8) { return a.utf8.lexicographicallyPrecedes(b.utf8) }
        default: break
        }
        return id.utf8.lexicographicallyPrecedes(other.id.utf8)
    }

    /// The cursor form: base64url (no padding) of `{"id": ..., "value": ...}`.
    public var cursor: String {
        let data = Data((try? SortedJSONEncoder().encode(self)) ?? [])
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Parses a cursor; `nil` when it is not one.
    public init?(cursor: String) {
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard cursor.utf8.count <= 4096, let data = Data(base64Encoded: base64),
            let position = try? CloudJSON.decode(QueryPosition.self, from: data), EntityKey.isValidName(position.id)
        else { return nil }
        self = position
    }
}

/// `GET /v1/collections/{collection}/objects` response body: one page of a query's result.
public struct QueryPage: Codable, Sendable, Equatable {
    /// The page's entities, in the query's order.
    public var items: [Entity]
    /// How many entities match the query in all.
    public var count: Int
    /// Set when more items follow the page: pass as `after` for the next page.
    public var nextCursor: String?
    /// Set when items precede the page: pass as `before` for the previous page.
    public var previousCursor: String?
    /// The event log's last sequence number as of the read: the page and `count` reflect every write up to
    /// it and none after. A realtime subscriber ignores, for the count, the events up to it that reach it
    /// after the page. Absent when the log is empty.
    public var seq: Int64?

    public init(items: [Entity], count: Int, nextCursor: String?, previousCursor: String?, seq: Int64? = nil) {
        self.items = items
        self.count = count
        self.nextCursor = nextCursor
        self.previousCursor = previousCursor
        self.seq = seq
    }
}

/// Where a page of a query starts.
public enum PageRequest: Sendable, Equatable {
    /// The first `limit` items.
    case first
    /// The last `limit` items.
    case last
    /// The `limit` items right after this position.
    case after(QueryPosition)
    /// The `limit` items right before this position.
    case before(QueryPosition)
}

/// What the caller may do with a collection, under the cloud's permissions (`GET
/// /v1/collections/{collection}/access`).
public struct CollectionAccess: Codable, Sendable, Equatable {
    public var collection: String
    /// May read its objects: fetch, query, and subscribe to its realtime topics.
    public var read: Bool
    /// May create, replace, merge and delete its objects.
    public var write: Bool

    public init(collection: String, read: Bool, write: Bool) {
        self.collection = collection
        self.read = read
        self.write = write
    }
}
