// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateCloud
import LiveJSON
import Testing

/// The kept counts of filtered queries: given back only at the collection's same last event, never without one.
@Suite struct FilteredCountsTests {
    private static func key(_ collection: String, _ channel: String) -> FilteredCounts.Key {
        FilteredCounts.Key(CollectionQuery(collection: collection, where: ["channel": .string(channel)], sort: QuerySort(field: "rank")))
    }

    @Test func aCountHoldsOnlyAtTheLastEventItWasCountedAt() {
        let counts = FilteredCounts()
        let key = Self.key("messages", "c1")
        #expect(counts.count(of: key, at: 7) == nil)
        counts.keep(25, of: key, at: 7)
        #expect(counts.count(of: key, at: 7) == 25)
        #expect(counts.count(of: key, at: 8) == nil, "a write to the collection since")
        #expect(counts.kept(for: key)?.seq == 7 && counts.kept(for: key)?.count == 25)
        // The sort is not part of a count; the filter and the collection are.
        #expect(counts.count(of: FilteredCounts.Key(CollectionQuery(collection: "messages", where: ["channel": "c1"])), at: 7) == 25)
        #expect(counts.count(of: Self.key("messages", "c2"), at: 7) == nil)
        #expect(counts.count(of: FilteredCounts.Key(CollectionQuery(collection: "messages", where: ["channel": 1])), at: 7) == nil)
        #expect(counts.count(of: Self.key("other", "c1"), at: 7) == nil)
        counts.keep(26, of: key, at: 9)
        #expect(counts.count(of: key, at: 7) == nil && counts.count(of: key, at: 9) == 26)
    }

    @Test func aCollectionWithNoEventInTheLogIsAlwaysCounted() {
        let counts = FilteredCounts()
        let key = Self.key("messages", "c1")
        counts.keep(3, of: key, at: nil)
        #expect(counts.count(of: key, at: nil) == nil)
        #expect(counts.kept(for: key) == nil)
        counts.keep(3, of: key, at: 4)
        #expect(counts.count(of: key, at: nil) == nil, "its events pruned since: two states may both have none")
    }

    @Test func atMostCapacityCountsAreKept() {
        let counts = FilteredCounts()
        for n in 0..<FilteredCounts.capacity { counts.keep(n, of: Self.key("c", "v\(n)"), at: 1) }
        #expect(counts.count(of: Self.key("c", "v0"), at: 1) == 0)
        counts.keep(1, of: Self.key("c", "v0"), at: 2)
        #expect(counts.count(of: Self.key("c", "v1"), at: 1) == 1, "a key kept again does not drop the others")
        counts.keep(7, of: Self.key("c", "new"), at: 1)
        #expect(counts.count(of: Self.key("c", "v1"), at: 1) == nil, "dropped when full")
        #expect(counts.count(of: Self.key("c", "new"), at: 1) == 7)
    }
}
