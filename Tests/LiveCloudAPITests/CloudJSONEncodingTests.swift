// Licensed under the Apache License, Version 2.0.

import Foundation
import JSONTestSupport
import LiveCloudAPI
import LiveJSON
import Testing

/// The cloud writes entities and their realtime events member by member (``Entity/write(into:)``,
/// ``RealtimeServerMessage/writeEntityEvent(into:)``): the bytes must be those of `JSONEncoder` with sorted keys
/// and unescaped slashes, which clients and stored rows were written with before.
@Suite struct CloudJSONEncodingTests {
    /// `value` through its `Encodable` conformance (LiveJSON's encoder: a `JSONValue` exactly, which Foundation's
    /// `JSONEncoder` cannot write).
    static func foundation(_ value: some Encodable) throws -> String {
        String(decoding: try SortedJSONEncoder().encode(value), as: UTF8.self)
    }

    static func entity(_ values: inout JSONSamples.Values) -> Entity {
        let odd = values.string()
        return Entity(
            collection: values.pick(["notes", "a.b_c-d", "x"]),
            id: values.string(),
            version: Int64(bitPattern: values.next()) >> Int64(values.next() % 64),
            data: values.value(),
            createdAt: values.string(),
            updatedAt: values.pick(["2026-11-26T16:00:00.000Z", odd]),
            deleted: values.next() % 2 == 0
        )
    }

    @Test func entitiesAreWrittenAsEncodableWritesThem() throws {
        var values = JSONSamples.Values(seed: 20_261_126)
        for _ in 0..<2_000 {
            let entity = Self.entity(&values)
            var writer = JSONWriter()
            try entity.write(into: &writer)
            let expected = try Self.foundation(entity)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == expected, "expected \(expected)")
        }
    }

    @Test func entityEventsAreWrittenAsEncodableWritesThem() throws {
        var values = JSONSamples.Values(seed: 2_026_112_602)
        let topics: [Topic] = [
            .object(EntityKey(collection: "notes", id: "n1")), .collection("notes"), .query("notes", where: ["tag": "a/b", "n": 2]),
            .stream("chat", user: "u1"),
        ]
        var written = 0
        for _ in 0..<2_000 {
            let maybe = { (values: inout JSONSamples.Values) in values.next() % 2 == 0 }
            var message = RealtimeServerMessage.event(
                seq: Int64(values.next() % 1_000_000),
                topic: values.pick(topics),
                entity: Self.entity(&values),
                previous: maybe(&values) ? values.value() : nil
            )
            if maybe(&values) { message.seq = nil }
            if maybe(&values) { message.topic = nil }
            if maybe(&values) { message.ref = Int64(values.next() % 100) }
            // Now and then a member only other messages carry, or another operation: not written here.
            switch values.next() % 12 {
            case 0: message.resync = true
            case 1: message.replayed = 3
            case 2: message.op = .ack
            case 3: message.entity = nil
            case 4: message.message = "m"
            default: break
            }
            var writer = JSONWriter()
            if try message.writeEntityEvent(into: &writer) {
                written += 1
                let expected = try Self.foundation(message)
                #expect(String(decoding: writer.bytes, as: UTF8.self) == expected, "expected \(expected)")
            } else {
                #expect(writer.bytes.isEmpty)
                #expect(message.op != .event || message.entity == nil || message.resync != nil || message.replayed != nil || message.message != nil)
            }
        }
        // Both kinds were seen.
        #expect(written > 1_000)
        #expect(written < 2_000)
    }
}
