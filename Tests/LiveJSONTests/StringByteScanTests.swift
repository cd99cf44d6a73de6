// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import SeededRandom
import Testing

/// Strings' bytes scanned eight at a time (`StringByteScan`): against a byte-at-a-time model, then through the
/// writer and the parser against Foundation, on strings long enough to take whole words, with what needs
/// escaping (or refusing) at every position.
@Suite struct StringByteScanTests {
    /// Bytes a string's scan tells apart: plain, each it looks for, and bytes with the high bit set.
    static let bytes: [UInt8] = [0x61, 0x7A, 0x20, 0x2F, 0x22, 0x5C, 0x00, 0x1F, 0x0A, 0x21, 0x5B, 0x5D, 0x7F, 0x80, 0xC3, 0xA9, 0xFF, 0x1E, 0x23]

    @Test func findsWhatAByteAtATimeFinds() {
        var random = SeededGenerator(seed: 20_261_128)
        for _ in 0..<20_000 {
            // Mostly plain bytes, so that flagged ones fall anywhere in a word, or beyond several.
            let count = Int.random(in: 0...40, using: &random)
            let text: [UInt8] = (0..<count).map { _ in
                Int.random(in: 0..<4, using: &random) == 0 ? Self.bytes.randomElement(using: &random)! : UInt8(ascii: "m")
            }
            let start = Int.random(in: 0...count, using: &random)
            let extra = [UInt8(ascii: "\""), UInt8(ascii: "/")].randomElement(using: &random)!
            var index = start
            var nonASCII = false
            while index < count {
                let byte = text[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == extra { break }
                if byte >= 0x80 { nonASCII = true }
                index += 1
            }
            let found = text.withUnsafeBytes { StringByteScan.firstFlagged(in: $0, from: start, extra: extra) }
            #expect(found.index == index && found.nonASCII == nonASCII, "\(text) from \(start), extra \(extra)")
        }
    }

    /// Long strings of pieces that need escaping, non-ASCII ones and plain runs.
    static func string(_ random: inout SeededGenerator) -> String {
        let pieces = [
            "abcdefgh", "a", "0123456789", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "é", "中", "😀", "\u{2028}", " ",
        ]
        return (0..<Int.random(in: 0...24, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    @Test func theWriterWritesWhatJSONEncoderWrites() throws {
        var random = SeededGenerator(seed: 20_261_129)
        for _ in 0..<3_000 {
            let value = JSONValue.string(Self.string(&random))
            for escapesSlashes in [false, true] {
                let encoder = JSONEncoder()
                encoder.outputFormatting = escapesSlashes ? [] : [.withoutEscapingSlashes]
                var writer = JSONWriter(escapesSlashes: escapesSlashes)
                try writer.write(value)
                #expect(writer.bytes == Array(try encoder.encode(value)), "\(value)")
            }
        }
    }

    @Test func theParserReadsWhatFoundationReads() throws {
        var random = SeededGenerator(seed: 20_261_130)
        for _ in 0..<3_000 {
            let string = Self.string(&random)
            // Foundation's encoding reads back as the string.
            let encoded = try JSONEncoder().encode(JSONValue.string(string))
            #expect(try JSONValue(parsing: Array(encoded)) == .string(string))
            // The string's bytes unescaped: read, or refused, as Foundation reads or refuses them.
            let raw = Array("\"\(string)\"".utf8)
            let expected = try? JSONDecoder().decode(JSONValue.self, from: Data(raw))
            #expect((try? JSONValue(parsing: raw)) == expected, "\(raw)")
        }
    }
}
