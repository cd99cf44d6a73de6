// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import SeededRandom
import Testing

@Suite struct JSONParsingTests {
    static let documents = [
        "{}", "[]", "null", "true", "false", "0", "-0", "12", "-12.5", "123456789012345678",
        #"" a \"q\" \\ \/ \b\f\n\r\t""#, #""\u00e9\u4E2D\ud83d\ude00""#, "\"é中😀\"",
        #"{"a":[1,{"b":null}],"c":{"d":"e"},"f":[[],{}]}"#, " \n\t{ \"a\" : 1 , \"b\" : [ true , false ] } \r\n",
    ]
    // Numbers with an exponent and repeated names are read as `JSONDecoder` cannot: JSONFidelityTests.

    @Test(arguments: documents) func parsesAsJSONDecoderDoes(_ text: String) throws {
        let expected = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(try JSONValue(parsing: text) == expected)
        #expect(try JSONValue(parsing: Array(text.utf8)) == expected)
        #expect(try Array(text.utf8).withUnsafeBytes { try JSONValue(parsing: $0) } == expected)
        // As the cache reads a row's data: in place, and the same as through a collection.
        #expect(try Array(text.utf8).withUnsafeBytes { try CloudJSON.value(utf8: $0) } == CloudJSON.value(utf8: Array(text.utf8)))
    }

    /// What the parser refuses, the cache's in-place read (``CloudJSON/value(utf8:)-(UnsafeRawBufferPointer)``) refuses
    /// too (or reads, as `JSONDecoder` would), as the read through a collection does.
    @Test(arguments: notJSON) func inPlaceReadsRefuseWhatCollectionReadsRefuse(_ bytes: [UInt8]) {
        let general = Result { try CloudJSON.value(utf8: bytes) }
        let inPlace = Result { try bytes.withUnsafeBytes { try CloudJSON.value(utf8: $0) } }
        switch (general, inPlace) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure(let a), .failure(let b)): #expect(String(describing: a) == String(describing: b))
        default: Issue.record("\(bytes): \(general) in general, \(inPlace) in place")
        }
        #expect(throws: JSONParseError.self) { try bytes.withUnsafeBytes { try JSONValue(parsing: $0) } }
    }

    static let notJSON: [[UInt8]] =
        [
            "", " ", "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "{1:2}", "01", "1.", ".5", "-", "+1", "1e", "nul", "tru", "[1] x",
            #""\x""#, "\"a\u{01}b\"", #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, "\"unterminated", #""\u12""#,
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ].map { Array($0.utf8) } + [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22]]

    @Test(arguments: notJSON) func refusesWhatIsNotJSON(_ bytes: [UInt8]) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: bytes) }
    }

    @Test func nestingUpToTheLimitIsAccepted() throws {
        let depth = JSONValue.maxParsingDepth
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(throws: Never.self) { try JSONValue(parsing: text) }
    }

    static let messages: [RealtimeServerMessage] = [
        RealtimeServerMessage(op: .ack, ref: 7, seq: 42, resync: false, replayed: 3),
        RealtimeServerMessage(
            op: .event,
            seq: 43,
            topic: .object(EntityKey(collection: "notes", id: "n1")),
            entity: Entity(
                collection: "notes",
                id: "n1",
                version: 9,
                data: ["text": "héllo \"x\"\n", "n": 1.5, "tags": ["a", .null, true], "nested": ["k": ["deep": 0]]],
                createdAt: "2026-01-01T00:00:00.000Z",
                updatedAt: "2026-01-02T00:00:00.000Z",
                deleted: false
            )
        ),
        RealtimeServerMessage(op: .error, ref: 8, code: .badRequest, message: "no such topic"),
        RealtimeServerMessage(
            op: .event,
            seq: 44,
            topic: .stream("chat", user: "u1"),
            streamMessage: StreamMessage(stream: "chat", from: "u2", to: "u1", at: "2026-01-01T00:00:00.000Z", message: ["hi": 1])
        ),
    ]

    @Test(arguments: messages) func decodesMessagesAsJSONDecoderDoes(_ message: RealtimeServerMessage) throws {
        let text = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
        let expected = try JSONDecoder().decode(RealtimeServerMessage.self, from: Data(text.utf8))
        #expect(try JSONValue.parse(text, as: RealtimeServerMessage.self) == expected)
    }

    @Test func integersAreReadExactlyOrRefusedNeverRounded() throws {
        let text = #"{"op":"ack","ref":1,"seq":1152921504606846977}"#
        #expect(try JSONValue.parse(text, as: RealtimeServerMessage.self).seq == 1_152_921_504_606_846_977)
        #expect(throws: DecodingError.self) {
            try JSONValue.parse(#"{"op":"ack","ref":1,"seq":9223372036854775808}"#, as: RealtimeServerMessage.self)
        }
        #expect(throws: DecodingError.self) { try JSONValue.parse(#"{"op":"ack","ref":1.5}"#, as: RealtimeServerMessage.self) }
    }

    /// The engine reads an entity's event directly from the parsed document (``CloudJSON/decodeRealtimeMessage(from:)``):
    /// over seeded variations of one (members missing, of another type, extra, integers beyond 2^53 or not
    /// whole), it must read what ``CloudJSON/decode(_:from:)-(_,String)`` reads, and refuse what it refuses.
    @Test func entityEventsAreReadDirectlyAsDecodableReadsThem() throws {
        let entity: JSONValue = [
            "collection": "notes", "id": "n1", "version": 9, "data": ["text": "a", "n": 1.5],
            "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-02T00:00:00.000Z", "deleted": false,
        ]
        let event: JSONValue = ["op": "event", "seq": 43, "topic": "object:notes/n1", "entity": entity, "previous": ["text": "b"]]
        let text = { (value: JSONValue) in String(decoding: try SortedJSONEncoder().encode(value), as: UTF8.self) }
        // The direct path is taken for an ordinary event (else this test would compare the general path with itself).
        #expect(RealtimeServerMessage(entityEvent: event) != nil)
        #expect(try CloudJSON.decodeRealtimeMessage(from: text(event)) == CloudJSON.decode(RealtimeServerMessage.self, from: text(event)))

        let oddValues: [JSONValue] = [
            .null, true, false, 0, 7, -3, 1.5, 9_007_199_254_740_993, 1_152_921_504_606_846_976, "", "event", "ack", "object:notes/n1",
            "collection:notes", "stream:chat/u1",
            "notes", "collection:notes", "x/y/z", [], [1], [:], ["text": "c"],
        ]
        let eventKeys = ["op", "seq", "topic", "entity", "previous", "ref", "code", "message", "resync", "replayed", "streamMessage"]
        let entityKeys = ["collection", "id", "version", "data", "createdAt", "updatedAt", "deleted", "extra"]
        var random = SeededGenerator(seed: 20_261_126)
        var direct = 0
        for _ in 0..<3000 {
            guard case .object(var members) = event, case .object(var entityMembers) = entity else { return }
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let inEntity = Bool.random(using: &random)
                let key = inEntity ? entityKeys.randomElement(using: &random)! : eventKeys.randomElement(using: &random)!
                let value = Int.random(in: 0..<4, using: &random) == 0 ? nil : oddValues.randomElement(using: &random)!
                if inEntity { entityMembers[key] = value } else { members[key] = value }
            }
            if members["entity"] != nil, members["entity"] == event["entity"] { members["entity"] = .object(entityMembers) }
            let document = JSONValue.object(members)
            let documentText = try text(document)
            let expected = try? CloudJSON.decode(RealtimeServerMessage.self, from: documentText)
            let read = try? CloudJSON.decodeRealtimeMessage(from: documentText)
            #expect(read == expected, "\(documentText)")
            if RealtimeServerMessage(entityEvent: document) != nil { direct += 1 }
        }
        // Both ways were exercised.
        #expect(direct > 100)
        #expect(direct < 2900)
    }

    @Test func missingAndMistypedMembersAreErrors() {
        #expect(throws: DecodingError.self) { try JSONValue.parse(#"{"ref":1}"#, as: RealtimeServerMessage.self) }
        #expect(throws: DecodingError.self) { try JSONValue.parse(#"{"op":"nope"}"#, as: RealtimeServerMessage.self) }
        #expect(throws: DecodingError.self) { try JSONValue.parse(#"{"op":"ack","ref":"1"}"#, as: RealtimeServerMessage.self) }
        #expect(throws: DecodingError.self) {
            try JSONValue.parse(#"{"op":"event","seq":1,"entity":{"collection":"c","id":"i","version":1}}"#, as: RealtimeServerMessage.self)
        }
    }
}
