// Licensed under the Apache License, Version 2.0.

import LiveSDK
import Testing

@Suite struct ShrinkingRemovalTests {
    /// A table a burst filled gives its storage back as it empties, and keeps every member not removed.
    @Test func aDrainedTableGivesItsStorageBackAndKeepsTheRest() {
        var dictionary: [Int: String] = [:]
        var set: Set<Int> = []
        for key in 0..<10_000 {
            dictionary[key] = "v\(key)"
            set.insert(key)
        }
        let grown = dictionary.capacity
        for key in 0..<9_990 {
            #expect(dictionary.removeValueShrinking(forKey: key) == "v\(key)")
            #expect(set.removeShrinking(key) == key)
        }
        #expect(dictionary.count == 10 && set.count == 10)
        #expect(dictionary.capacity <= 64 && set.capacity <= 64, "capacity \(dictionary.capacity) / \(set.capacity), grown \(grown)")
        #expect(dictionary == Dictionary(uniqueKeysWithValues: (9_990..<10_000).map { ($0, "v\($0)") }))
        #expect(set == Set(9_990..<10_000))
        #expect(dictionary.removeValueShrinking(forKey: 0) == nil && set.removeShrinking(0) == nil)
    }
}
