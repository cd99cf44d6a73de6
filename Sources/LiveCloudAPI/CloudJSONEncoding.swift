// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// The messages the cloud writes most (an entity, and an entity's realtime event: every write stores the first
/// twice and sends the second once per topic), written member by member with ``JSONWriter``: the bytes their
/// `Encodable` conformances give through `JSONEncoder` with sorted keys and unescaped slashes, without building
/// a container per member. The tests compare both over seeded values.
extension Entity {
    /// This entity, as `Encodable` writes it. Throws for data holding a number that is not finite (as
    /// `JSONEncoder` does).
    public func write(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber) {
        writer.beginObject()
        writer.writeKey(literal: "collection", first: true)
        writer.write(collection)
        writer.writeKey(literal: "createdAt")
        writer.write(createdAt)
        writer.writeKey(literal: "data")
        try writer.write(data)
        writer.writeKey(literal: "deleted")
        writer.write(deleted)
        writer.writeKey(literal: "id")
        writer.write(id)
        writer.writeKey(literal: "updatedAt")
        writer.write(updatedAt)
        writer.writeKey(literal: "version")
        writer.write(version)
        writer.endObject()
    }
}

extension RealtimeServerMessage {
    /// Writes this message if it is an entity's event (`op` `event` with an `entity`, none of the members other
    /// messages carry), as `Encodable` writes it, and returns `true`; leaves `writer` as it was and returns
    /// `false` for any other message.
    public func writeEntityEvent(into writer: inout JSONWriter) throws(JSONWriter.NonFiniteNumber) -> Bool {
        guard op == .event, let entity, code == nil, message == nil, streamMessage == nil, resync == nil, replayed == nil
        else { return false }
        // Members in the order of their keys' bytes: entity, op, previous, ref, seq, topic.
        writer.beginObject()
        writer.writeKey(literal: "entity", first: true)
        try entity.write(into: &writer)
        writer.writeKey(literal: "op")
        writer.write("event")
        if let previous {
            writer.writeKey(literal: "previous")
            try writer.write(previous)
        }
        if let ref {
            writer.writeKey(literal: "ref")
            writer.write(ref)
        }
        if let seq {
            writer.writeKey(literal: "seq")
            writer.write(seq)
        }
        if let topic {
            writer.writeKey(literal: "topic")
            writer.write(topic.description)
        }
        writer.endObject()
        return true
    }
}
