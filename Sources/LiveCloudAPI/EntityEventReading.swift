// Licensed under the Apache License, Version 2.0.

import LiveJSON

extension RealtimeServerMessage {
    /// An entity's `event` read from its text member by member (``JSONReader``): no tree for the envelope and the
    /// entity, only for the data and `previous`. `nil` for any other message, and for any the reader does not
    /// take exactly as ``init(entityEvent:)`` would from the parsed document: a member it does not know, a name
    /// given twice or with an escape, anything missing or of another type. Those go the general way.
    package init?(readingEntityEvent text: String) {
        guard
            let message = JSONReader.read(
                text,
                { reader throws(JSONParseError) -> RealtimeServerMessage? in
                    try Self.readEntityEvent(&reader)
                }
            )
        else { return nil }
        self = message
    }

    private static func readEntityEvent(_ reader: inout JSONReader) throws(JSONParseError) -> RealtimeServerMessage? {
        guard try reader.enterObject() else { return nil }
        var seen = EventMember.Seen()
        var seq: Int64?
        var topic: Topic?
        var entity: Entity?
        var previous: JSONValue?
        var ref: Int64?
        repeat {
            guard let name = try reader.name(), let member = EventMember(name), seen.insert(member) else { return nil }
            switch member {
            case .op:
                guard try reader.string() == "event" else { return nil }
            case .seq:
                guard let integer = exactInteger(try reader.number()) else { return nil }
                seq = integer
            case .topic:
                guard let read = Topic(try reader.string()) else { return nil }
                topic = read
            case .entity:
                guard let read = try Entity.read(&reader) else { return nil }
                entity = read
            case .previous:
                if try !reader.null() { previous = try reader.value() }
            case .ref:
                if try !reader.null() {
                    guard let integer = exactInteger(try reader.number()) else { return nil }
                    ref = integer
                }
            }
        } while try reader.nextMember()
        try reader.end()
        guard seen.contains(.op), let seq, let topic, let entity else { return nil }
        return RealtimeServerMessage(op: .event, ref: ref, seq: seq, topic: topic, entity: entity, previous: previous)
    }

    /// An integer as ``exactInteger(_:)-(JSONValue)`` takes one: as ``JSONValueDecoder`` decodes an `Int64`.
    static func exactInteger(_ number: JSONNumber) -> Int64? {
        number.integerValue(Int64.self)
    }

    /// The members of an entity's event that the reader takes.
    private enum EventMember: Int {
        case op, seq, topic, entity, previous, ref

        init?(_ name: UnsafeRawBufferPointer) {
            switch name.count {
            case 2 where JSONReader.name(name, is: "op"): self = .op
            case 3 where JSONReader.name(name, is: "seq"): self = .seq
            case 3 where JSONReader.name(name, is: "ref"): self = .ref
            case 5 where JSONReader.name(name, is: "topic"): self = .topic
            case 6 where JSONReader.name(name, is: "entity"): self = .entity
            case 8 where JSONReader.name(name, is: "previous"): self = .previous
            default: return nil
            }
        }

        typealias Seen = MemberSet<Self>
    }
}

extension Entity {
    /// An entity read member by member, as ``init(parsed:)`` reads one from its parsed document; `nil` for one it
    /// does not read exactly alike (a member it does not know, given twice or with an escaped name, missing, or of
    /// another type).
    static func read(_ reader: inout JSONReader) throws(JSONParseError) -> Entity? {
        guard try reader.enterObject() else { return nil }
        var seen = Member.Seen()
        var collection = ""
        var id = ""
        var version: Int64 = 0
        var data = JSONValue.null
        var createdAt = ""
        var updatedAt = ""
        var deleted = false
        repeat {
            guard let name = try reader.name(), let member = Member(name), seen.insert(member) else { return nil }
            switch member {
            case .collection: collection = try reader.string()
            case .id: id = try reader.string()
            case .version:
                guard let integer = RealtimeServerMessage.exactInteger(try reader.number()) else { return nil }
                version = integer
            case .data: data = try reader.value()
            case .createdAt: createdAt = try reader.string()
            case .updatedAt: updatedAt = try reader.string()
            case .deleted: deleted = try reader.bool()
            }
        } while try reader.nextMember()
        guard seen.count == Member.allCases.count else { return nil }
        return Entity(collection: collection, id: id, version: version, data: data, createdAt: createdAt, updatedAt: updatedAt, deleted: deleted)
    }

    /// The members of an entity.
    private enum Member: Int, CaseIterable {
        case collection, id, version, data, createdAt, updatedAt, deleted

        init?(_ name: UnsafeRawBufferPointer) {
            switch name.count {
            case 2 where JSONReader.name(name, is: "id"): self = .id
            case 4 where JSONReader.name(name, is: "data"): self = .data
            case 7 where JSONReader.name(name, is: "version"): self = .version
            case 7 where JSONReader.name(name, is: "deleted"): self = .deleted
            case 9 where JSONReader.name(name, is: "createdAt"): self = .createdAt
            case 9 where JSONReader.name(name, is: "updatedAt"): self = .updatedAt
            case 10 where JSONReader.name(name, is: "collection"): self = .collection
            default: return nil
            }
        }

        typealias Seen = MemberSet<Self>
    }
}

/// The members of an object read so far, by their enum's raw value (under 64 of them).
private struct MemberSet<Member: RawRepresentable<Int>> {
    private var bits: UInt64 = 0

    /// Adds `member`: `false` when it was already there (a name given twice).
    mutating func insert(_ member: Member) -> Bool {
        let bit: UInt64 = 1 << UInt64(member.rawValue)
        defer { bits |= bit }
        return bits & bit == 0
    }

    func contains(_ member: Member) -> Bool { bits & (1 << UInt64(member.rawValue)) != 0 }

    var count: Int { bits.nonzeroBitCount }
}
