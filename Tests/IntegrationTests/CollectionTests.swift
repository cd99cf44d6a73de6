// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveChangeSet
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// Waits for the first collection update that satisfies `predicate`, skipping the others.
func update(
    _ queue: Queue<CollectionUpdate>,
    timeout: Duration = .seconds(20),
    _ what: String,
    where predicate: @escaping @Sendable (CollectionUpdate) -> Bool
) async throws -> CollectionUpdate {
    try await withTimeout(timeout, "waiting for \(what)") {
        while let update = try await queue.next() {
            if predicate(update) { return update }
        }
        throw ClusterError("the observation ended while waiting for \(what)")
    }
}

extension CollectionUpdate {
    var ids: [String] { items.map(\.id) }
}

/// Live collections through the daemon: shared windows, pages, realtime changes at their sorted place,
/// change sets that the client library applies and checks.
@Suite(.serialized) struct CollectionTests {
    static let query = QueryParams(where: ["channel": "c1"], sort: SortParams(field: "rank"))

    @Test func twoClientsShareOneWindowAndSeeRemoteChangesInPlace() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for (id, rank) in [("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)] {
            try await cluster.put("messages", id, ["channel": "c1", "rank": .integer(rank)], token: token)
        }
        try await cluster.put("messages", "other", ["channel": "c2", "rank": 1], token: token)

        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "a") { a in
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "b") { b in
                let observationA = try await a.observeCollection(collection: "messages", query: Self.query, pageSize: 2)
                let observationB = try await b.observeCollection(collection: "messages", query: Self.query, pageSize: 2)
                let (updatesA, updatesB) = (Queue(observationA.updates), Queue(observationB.updates))
                for queue in [updatesA, updatesB] {
                    let fresh = try await update(queue, "the first page") { $0.change.dataStatus == .fresh }
                    #expect(fresh.ids == ["a", "b"])
                    #expect(fresh.change.count == 5 && fresh.change.hasNext && !fresh.change.hasPrevious)
                }
                // One query fetch and one collection topic for both clients.
                let stats = try await cluster.stats()
                #expect(stats.fetches.filter { $0.key.hasPrefix("query:") }.values.reduce(0, +) == 1)
                #expect(stats.subscriptions["collection:messages"] == 1)

                // A remote insert inside the window lands at its sorted place, for both; the window holds its
                // page, so b, pushed past it, leaves.
                try await cluster.put("messages", "ab", ["channel": "c1", "rank": 15], token: token)
                for queue in [updatesA, updatesB] {
                    let inserted = try await update(queue, "the insert") { $0.ids.contains("ab") }
                    #expect(inserted.ids == ["a", "ab"])
                    #expect(inserted.change.changes.insertions == [1] && inserted.change.changes.deletions == [1])
                    #expect(inserted.change.count == 6 && inserted.change.hasNext)
                }

                // A pages on; B's window stays as it was.
                #expect(try await a.nextPage(token: observationA.token))
                let paged = try await update(updatesA, "the second page") { $0.items.count > 2 }
                #expect(paged.ids == ["a", "ab", "b", "c"])
                let window = try await a.items(token: observationA.token, offset: 3, limit: 10)
                #expect(window.items.map(\.id) == ["c"] && window.size == 4)

                // An item that leaves the filter leaves both windows, which are refilled from beyond their end;
                // a modification moves one in A.
                try await cluster.put("messages", "a", ["channel": "c2", "rank": 10], token: token)
                try await cluster.put("messages", "b", ["channel": "c1", "rank": 35], token: token)
                let movedA = try await update(updatesA, "b moved after c") { $0.ids == ["ab", "c", "b", "d"] }
                #expect(movedA.items[2].version == 2 && movedA.change.count == 5)
                // In B's one-page window, b's new place is past its end: c, next in the result, takes the place.
                let movedB = try await update(updatesB, "a and b left, c came in") { $0.ids == ["ab", "c"] }
                #expect(movedB.change.hasNext && movedB.change.count == 5)

                // Deletion is a change like any other.
                try await cluster.delete("messages", "ab")
                let refilled = try await update(updatesB, "ab deleted") { !$0.ids.contains("ab") && $0.ids.count == 2 }
                #expect(refilled.ids == ["c", "b"] && refilled.change.count == 4)

                // Another connection cannot page this token.
                await #expect(throws: LiveGateError.self) { try await b.nextPage(token: observationA.token + 100) }
            }
        }
        try await eventually("the daemon to release the collection topic") {
            try await cluster.stats().subscriptions["collection:messages"] == nil
        }
    }

    @Test func aLastAnchoredWindowPagesBackwards() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for n in 0..<7 { try await cluster.put("chat", "m\(n)", ["channel": "c1", "rank": .integer(n)], token: token) }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "chat") { client in
            let observation = try await client.observeCollection(collection: "chat", query: Self.query, pageSize: 3, anchor: .last)
            let updates = Queue(observation.updates)
            let newest = try await update(updates, "the newest page") { $0.change.dataStatus == .fresh }
            #expect(newest.ids == ["m4", "m5", "m6"] && newest.change.hasPrevious && !newest.change.hasNext)
            #expect(try await client.nextPage(token: observation.token) == false)
            #expect(try await client.previousPage(token: observation.token))
            let older = try await update(updates, "an older page") { $0.items.count == 6 }
            #expect(older.ids == ["m1", "m2", "m3", "m4", "m5", "m6"])
            #expect(older.change.changes.insertions == [0, 1, 2])
            // A new message at the end arrives at the end.
            try await cluster.put("chat", "m7", ["channel": "c1", "rank": 7], token: token)
            _ = try await update(updates, "the new message") { $0.ids.last == "m7" }
            #expect(try await client.resetPage(token: observation.token))
            let reset = try await update(updates, "back to one page") { $0.items.count == 3 }
            #expect(reset.ids == ["m5", "m6", "m7"])
        }
    }

    @Test func badCollectionRequestsAreClearErrors() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "bad") { client in
            for (query, pageSize) in [
                (QueryParams(where: ["a.b": 1]), 20), (QueryParams(where: ["a": ["x": 1]]), 20),
                (QueryParams(sort: SortParams(field: "")), 20), (QueryParams(), 0), (QueryParams(), 101),
            ] {
                let error = await #expect(throws: LiveGateError.self) {
                    _ = try await client.observeCollection(collection: "m", query: query, pageSize: pageSize)
                }
                #expect(error?.code == .invalidParams)
            }
            let object = try await client.observeObject(collection: "m", id: "x")
            let error = await #expect(throws: LiveGateError.self) { _ = try await client.nextPage(token: object.token) }
            #expect(error?.code == .invalidParams)
        }
    }
}
