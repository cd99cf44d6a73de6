// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// A window's pages are read one request after another; an object that moves across the cursor between two
/// reads comes in both. The live checker's seed 6209627218999959 (600 s on PostgreSQL) saw the window
/// `{group: *, rank desc, pageSize 12}` of 12 pages refetched in two reads (100, then 44): an object written
/// between them was in both, the window held it twice and its last object not at all, and the change set
/// sent to clients (which keys items by id) deleted that last object and inserted nothing while its size
/// said 144: every later change set was off by one.
@Suite("Window pages read")
struct WindowPagesReadTests {
    static func entity(_ id: String, rank: Int, version: Int64) -> Entity {
        Entity(collection: "m", id: id, version: version, data: ["rank": .number(JSONNumber(rank))], createdAt: "t", updatedAt: "t", deleted: false)
    }

    @Test func anObjectReadTwiceIsKeptOnceWhereItsNewerCopyPutsIt() {
        var read = WindowPagesRead(anchor: .first)
        read.add([Self.entity("a", rank: 1, version: 1), Self.entity("b", rank: 2, version: 1), Self.entity("c", rank: 3, version: 1)])
        // b moved past the cursor (rank 2 to 5) before the second read.
        read.add([Self.entity("d", rank: 4, version: 1), Self.entity("b", rank: 5, version: 2), Self.entity("e", rank: 6, version: 1)])
        #expect(read.items.map(\.id) == ["a", "c", "d", "b", "e"])
        #expect(read.items.first { $0.id == "b" }?.version == 2)
        #expect(Set(read.items.map(\.id)).count == read.items.count)
    }

    @Test func fromTheLastPageTheEarlierPagesGoBefore() {
        var read = WindowPagesRead(anchor: .last)
        read.add([Self.entity("d", rank: 4, version: 1), Self.entity("e", rank: 5, version: 1)])
        // e moved before the cursor (rank 5 to 1) before the read of the page before.
        read.add([Self.entity("e", rank: 1, version: 2), Self.entity("b", rank: 2, version: 1)])
        #expect(read.items.map(\.id) == ["e", "b", "d"])
    }

    @Test func anOlderCopyInALaterPageDoesNotReplaceTheNewer() {
        var read = WindowPagesRead(anchor: .first)
        read.add([Self.entity("a", rank: 1, version: 3)])
        read.add([Self.entity("a", rank: 2, version: 2), Self.entity("b", rank: 3, version: 1)])
        #expect(read.items.map(\.id) == ["a", "b"])
        #expect(read.items[0].version == 3)
    }
}
