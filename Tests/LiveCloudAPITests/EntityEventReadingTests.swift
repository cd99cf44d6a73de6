// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import SeededRandom
import Testing

/// The entity's event read member by member from its text (``RealtimeServerMessage/init(readingEntityEvent:)``),
/// against the general decoder (`Decodable` over the parsed document) as the model: over seeded texts of an event
/// (members in any order, whitespace anywhere JSON allows it, names given twice or escaped, members unknown,
/// missing or of another type, numbers not whole or beyond 2^53), whatever the reader reads, the general decoder
/// reads alike; and what the engine decodes (``CloudJSON/decodeRealtimeMessage(from:)``) is what it decodes.
@Suite struct EntityEventReadingTests {
    /// Each member's text, with the odd texts it may take instead.
    static let eventMembers: [(name: String, value: String, odd: [String])] = [
        ("op", #""event""#, [#""ack""#, #""ev\u0065nt""#, "1", "null"]),
        ("seq", "43", ["43.0", "4.3e1", "43.5", "-0", "9007199254740993", "1e300", #""43""#, "null"]),
        ("topic", #""object:notes/n1""#, [#""collection:notes""#, #""object:notes/n\/1""#, #""nope""#, "7", "null"]),
        ("previous", #"{"text":"b"}"#, ["null", "[1,2]", #""p""#, "{}", "-1.5e-3"]),
        ("ref", "5", ["null", "5.5", #""5""#, "-12"]),
    ]
    static let entityMembers: [(name: String, value: String, odd: [String])] = [
        ("collection", #""notes""#, [#""n\u006ftes""#, "1", "null", #""""#]),
        ("id", #""n1""#, [#""n\"1""#, "true", "null"]),
        ("version", "9", ["9.0", "9.25", "-9", "1e16", "1152921504606846976", #""9""#]),
        ("data", #"{"n":1.5,"text":"a\n\u00e9"}"#, ["null", "[]", "{}", #"{"k":1,"k":2}"#, #""s""#, "[[[[{}]]]]"]),
        ("createdAt", #""2026-01-01T00:00:00.000Z""#, ["0", "null"]),
        ("updatedAt", #""2026-01-02T00:00:00.000Z""#, ["false", "null"]),
        ("deleted", "false", ["true", "0", "null", #""false""#]),
    ]
    static let whitespace = ["", "", "", " ", "\n", "\t ", "\r\n  "]

    @Test func whatTheReaderReadsTheGeneralDecoderReadsAlike() throws {
        var random = SeededGenerator(seed: 20_261_128)
        var read = 0
        for round in 0..<4000 {
            // The first rounds are ordinary events: the reader must take them.
            let plain = round < 20
            let entity = Self.object(Self.entityMembers, plain: plain, random: &random)
            var members = Self.eventMembers
            members.append(("entity", entity, ["null", "[]", #""e""#]))
            let text = Self.object(members, plain: plain, random: &random)
            let general = try? CloudJSON.decode(RealtimeServerMessage.self, from: text)
            let reader = RealtimeServerMessage(readingEntityEvent: text)
            if let reader {
                read += 1
                #expect(reader == general, "\(text)")
            }
            if plain { #expect(reader != nil, "\(text)") }
            #expect((try? CloudJSON.decodeRealtimeMessage(from: text)) == general, "\(text)")
        }
        // Both ways were exercised.
        #expect(read > 800)
        #expect(read < 3600)
    }

    /// An object's text from `members`: in a random order with random whitespace, each member kept (most often), dropped,
    /// given twice, unknown, with its name escaped or with an odd value (`plain`: none of that but the order and
    /// the whitespace).
    static func object(
        _ members: [(name: String, value: String, odd: [String])],
        plain: Bool,
        random: inout SeededGenerator
    ) -> String {
        func space() -> String { whitespace.randomElement(using: &random)! }
        var parts: [String] = []
        for member in members.shuffled(using: &random) {
            let roll = plain ? 99 : Int.random(in: 0..<300, using: &random)
            var name = member.name
            var value = member.value
            switch roll {
            case 0..<3: continue  // missing
            case 3..<6: name = "\\u00" + String(name.utf8.first!, radix: 16) + name.dropFirst()  // escaped name
            case 6..<9: parts.append("\"\(name)\"\(space()):\(space())\(member.odd.randomElement(using: &random)!)")  // twice
            case 9..<12: parts.append("\"extra\":\(space())\(member.odd.randomElement(using: &random)!)")  // unknown
            case 12..<24: value = member.odd.randomElement(using: &random)!
            default: break
            }
            parts.append("\"\(name)\"\(space()):\(space())\(value)")
        }
        return "\(space()){\(space())" + parts.joined(separator: "\(space()),\(space())") + "\(space())}\(space())"
    }
}
