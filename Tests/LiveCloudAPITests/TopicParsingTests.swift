// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import SeededRandom
import Testing

/// A topic's wire form read back (`Topic.init?(_:)`), checked against what the names allow: an object's topic is
/// `object:` then two valid names (letters, digits, `_`, `-`, `.`; 1 to 128 bytes) around one `/`.
@Suite struct TopicParsingTests {
    private static let pieces = ["a", "notes", "n-1", "x_y.z", "", "/", "é", " ", ":", "?", "A9", String(repeating: "k", count: 129)]

    private static func isValid(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128
            && name.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_-.".unicodeScalars.contains($0)
            }
    }

    @Test func objectTopicsAreReadAsTheirNamesAllow() {
        var random = SeededGenerator(seed: 0x70_91C)
        for _ in 0..<2_000 {
            let collection = (0..<Int.random(in: 1...3, using: &random)).map { _ in Self.pieces.randomElement(using: &random)! }.joined()
            let id = (0..<Int.random(in: 1...3, using: &random)).map { _ in Self.pieces.randomElement(using: &random)! }.joined()
            let text = "object:\(collection)/\(id)"
            let expected: Topic? =
                Self.isValid(collection) && Self.isValid(id) ? .object(EntityKey(collection: collection, id: id)) : nil
            #expect(Topic(text) == expected, "\(text)")
            if let expected { #expect(expected.description == text) }
        }
        #expect(Topic("object:a") == nil)
        #expect(Topic("object:/a") == nil)
        #expect(Topic("object:a/") == nil)
        #expect(Topic("object:a/b/c") == nil)
        #expect(Topic("objects:a/b") == nil)
        #expect(Topic("collection:notes") == .collection("notes"))
        #expect(Topic("stream:chat/u1") == .stream("chat", user: "u1"))
    }
}
