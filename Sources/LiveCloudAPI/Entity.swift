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
///
/// Its hash is worked out once, when it is made (``hash(into:)`` feeds that one word): a key is looked up in
/// several tables on its way through the daemon (the topics, the engine's observations, their starts and
/// activations, and again each time one of them grows), and hashing its two strings each time was ~1 % of the
/// CPU of a burst of cached answers.
public struct EntityKey: Hashable, Sendable, Codable, CustomStringConvertible {
    public var collection: String { didSet { precomputedHash = Self.hash(collection, id) } }
    public var id: String { didSet { precomputedHash = Self.hash(collection, id) } }
    /// The strings' hash with this process's seed (``Hasher``'s own: as hard to collide on purpose as hashing
    /// the strings in every table). Never leaves the process: not encoded.
    private var precomputedHash: Int

    public init(collection: String, id: String) {
        self.collection = collection
        self.id = id
        precomputedHash = Self.hash(collection, id)
    }

    private static func hash(_ collection: String, _ id: String) -> Int {
        var hasher = Hasher()
        hasher.combine(collection)
        hasher.combine(id)
        return hasher.finalize()
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(precomputedHash) }

    public static func == (lhs: EntityKey, rhs: EntityKey) -> Bool {
        lhs.precomputedHash == rhs.precomputedHash && lhs.id == rhs.id && lhs.collection == rhs.collection
    }

    private enum CodingKeys: String, CodingKey { case collection, id }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(collection: try container.decode(String.self, forKey: .collection), id: try container.decode(String.self, forKey: .id))
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
