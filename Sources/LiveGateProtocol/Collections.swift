// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveJSON

// MARK: collection.observe

/// A query: equality filters on top-level fields and an order (see `Protocol/ipc/README.md`).
public struct QueryParams: Codable, Sendable, Equatable {
    /// Field → the value it must equal (string, number, boolean or null).
    public var `where`: [String: JSONValue]?
    public var sort: SortParams?

    public init(where filters: [String: JSONValue]? = nil, sort: SortParams? = nil) {
        self.where = filters
        self.sort = sort
    }
}

public struct SortParams: Codable, Sendable, Equatable {
    public var field: String
    public var descending: Bool?

    public init(field: String, descending: Bool? = nil) {
        self.field = field
        self.descending = descending
    }
}

/// Which end of the result a collection token's window starts from.
public enum CollectionAnchorParam: String, Codable, Sendable, CaseIterable {
    /// The first page; `collection.nextPage` extends towards the end. The default.
    case first
    /// The last page; `collection.previousPage` extends towards the start.
    case last

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let anchor = Self(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be \"first\" or \"last\"")
        }
        self = anchor
    }
}

public struct CollectionObserveParams: Codable, Sendable {
    public var collection: String
    public var query: QueryParams?
    /// Items per page, 1-100; default 20.
    public var pageSize: Int?
    public var anchor: CollectionAnchorParam?
    /// Fire exactly once (the cached result if there is one, else the fetched one), then the token ends.
    public var once: Bool?
    /// Pages the window starts with, 1-1000; default 1 (a client restoring a window it had paged asks for
    /// them all at once, so the window comes back whole).
    public var pages: Int?

    public init(
        collection: String,
        query: QueryParams? = nil,
        pageSize: Int? = nil,
        anchor: CollectionAnchorParam? = nil,
        once: Bool? = nil,
        pages: Int? = nil
    ) {
        self.collection = collection
        self.query = query
        self.pageSize = pageSize
        self.anchor = anchor
        self.once = once
        self.pages = pages
    }
}

// MARK: collection.nextPage / previousPage / resetPage

public struct PageResult: Codable, Sendable, Equatable {
    /// `false` when there was no such page (no next page, no previous page, or already one page).
    public var moved: Bool
    public init(moved: Bool) { self.moved = moved }
}

// MARK: collection.items

public struct CollectionItemsParams: Codable, Sendable {
    /// What `collection.items` reads.
    public enum Source: String, Codable, Sendable {
        /// The token's window, as the daemon holds it.
        case window
        /// The query's whole result, by index, from the daemon's cache.
        case result
    }

    public var token: Int64
    public var offset: Int
    /// 1-1000.
    public var limit: Int
    /// `nil`: the window.
    public var from: Source?

    public init(token: Int64, offset: Int, limit: Int, from: Source? = nil) {
        self.token = token
        self.offset = offset
        self.limit = limit
        self.from = from
    }
}

public struct CollectionItemsResult: Codable, Sendable, Equatable {
    public var offset: Int
    public var items: [ObjectSnapshot]
    /// How many items the token's window holds (`from: window`), or the result's count (`from: result`).
    public var size: Int
    /// How many objects match the query in all.
    public var count: Int

    public init(offset: Int, items: [ObjectSnapshot], size: Int, count: Int) {
        self.offset = offset
        self.items = items
        self.size = size
        self.count = count
    }
}

// MARK: collection.changed

/// `collection.changed`: how a token's window changed. Like `object.changed`, the member `token` is written
/// per connection and this body is encoded once per change for every token that receives it.
///
/// `changes` take the window from the token's previous notification to this one (both coordinates, see
/// `ChangeSet`); `items` holds the snapshots of inserted and modified items, keyed by their new index. With
/// `reset: true` the changes start from an empty window instead: the client replaces what it holds (sent
/// when a slow client's pending notifications were merged into one).
public struct CollectionChangedBody: Codable, Sendable, Equatable {
    public var count: Int
    /// How many items the window holds after the change.
    public var size: Int
    public var changes: ChangeSet
    public var items: [String: ObjectSnapshot]
    public var hasNext: Bool
    public var hasPrevious: Bool
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: RPCError?
    public var resync: Bool?
    public var reset: Bool?
    /// The ids of the window's items that include writes of this host the cloud has not confirmed yet,
    /// sorted (absent when none).
    public var pendingIds: [String]?

    public init(
        count: Int,
        size: Int,
        changes: ChangeSet,
        items: [String: ObjectSnapshot],
        hasNext: Bool,
        hasPrevious: Bool,
        dataStatus: DataStatus,
        loadingStatus: LoadingStatus,
        error: RPCError? = nil,
        resync: Bool? = nil,
        reset: Bool? = nil,
        pendingIds: [String]? = nil
    ) {
        self.count = count
        self.size = size
        self.changes = changes
        self.items = items
        self.hasNext = hasNext
        self.hasPrevious = hasPrevious
        self.dataStatus = dataStatus
        self.loadingStatus = loadingStatus
        self.error = error
        self.resync = resync
        self.reset = reset
        self.pendingIds = pendingIds
    }
}

/// `collection.changed` as a client decodes it (token and body together).
public struct CollectionChangedParams: Decodable, Sendable, Equatable {
    public var token: Int64
    public var count: Int
    public var size: Int
    public var changes: ChangeSet
    public var items: [String: ObjectSnapshot]
    public var hasNext: Bool
    public var hasPrevious: Bool
    public var dataStatus: DataStatus
    public var loadingStatus: LoadingStatus
    public var error: RPCError?
    public var resync: Bool?
    public var reset: Bool?
    public var pendingIds: [String]?

    /// Applies the notification to the window a client holds (`old`, its previous state), giving the new one.
    /// Returns `nil` when the notification does not fit `old` (a bug, or a lost notification).
    public func apply(to old: [ObjectSnapshot]) -> [ObjectSnapshot]? {
        let base = reset == true ? [] : old
        guard base.count - changes.deletions.count + changes.insertions.count == size else { return nil }
        for index in changes.insertions + changes.modifications.map(\.new) where items[String(index)] == nil { return nil }
        let all = changes.deletions + changes.moves.map(\.old) + changes.modifications.map(\.old)
        guard all.allSatisfy({ base.indices.contains($0) }) else { return nil }
        let targets = changes.insertions + changes.moves.map(\.new) + changes.modifications.map(\.new)
        guard targets.allSatisfy({ (0..<size).contains($0) }),
            Set(changes.insertions + changes.moves.map(\.new)).count
                == changes.insertions.count + changes.moves.count
        else { return nil }
        return changes.apply(to: base) { items[String($0)]! }
    }
}
