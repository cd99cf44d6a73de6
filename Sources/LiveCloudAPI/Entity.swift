// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// One stored object of a collection, as the cloud returns it. Server-kept fields: `version`
/// (starts at 1, +1 on each write), `createdAt`, `updatedAt` (RFC 3339, UTC) and `deleted`.
public struct Entity: Codable, Sendable, Hashable {
    public var collection: String
    public var id: String
    public var version: Int64
    public var data: JSONValue
    public var createdAt: String
    public var updatedAt: String
    public var deleted: Bool

    public init(
        collection: String,
        id: String,
        version: Int64,
        data: JSONValue,
        createdAt: String,
        updatedAt: String,
        deleted: Bool = false
    ) {
        self.collection = collection
        self.id = id
        self.version = version
        self.data = data
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deleted = deleted
    }

    /// The key that names this entity across the system: `collection/id`.
    public var key: EntityKey { EntityKey(collection: collection, id: id) }
}

/// The name of one entity: its collection and its id.
public struct EntityKey: Hashable, Sendable, Codable, CustomStringConvertible {
    public var collection: String
    public var id: String

    public init(collection: String, id: String) {
        self.collection = collection
        self.id = id
    }

    /// `collection/id`, the form used in stats and logs.
    public var description: String { "\(collection)/\(id)" }

    /// Collection names and ids: 1 to 128 characters of `A-Z a-z 0-9 _ - .`, so they are safe in paths and topics.
    public static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 128 else { return false }
        return name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x5F || byte == 0x2D || byte == 0x2E
        }
    }
}
