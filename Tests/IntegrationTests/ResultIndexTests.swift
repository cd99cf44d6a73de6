// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import LiveSDK
import Logging
import Testing

/// The engine's windowed reads by index of a query's whole result (`LiveCollectionToken.object(at:)`,
/// `objects(in:)`, `allObjects()`), read from the cache and kept current by realtime, against the real cloud.
@Suite(.serialized) struct ResultIndexTests {
    @Test func theWholeResultIsReadByIndexAndKeptCurrent() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        // 250 rows, rank 0, 10, 20, ...: r0 ... r249 in order.
        for n in 0..<250 {
            try await cluster.put("rows", "r\(n)", ["rank": .integer(n * 10)], token: token)
        }
        var expected = (0..<250).map { "r\($0)" }
        try await withEngine(cluster) { engine in
            let rows = engine.collection(CollectionQuery(collection: "rows", sort: QuerySort(field: "rank")), pageSize: 20)
            let observation = await rows.observe { _ in }
            #expect(try await observation.resultCount() == 250)
            #expect(try await observation.objects(in: 100..<130).map(\.id) == Array(expected[100..<130]))
            #expect(try await observation.object(at: 0)?.id == "r0")
            #expect(try await observation.object(at: 199)?.id == "r199")  // two pages of 100 fetched so far

            // Realtime changes inside the part fetched, and beyond it (fetched later, at its place).
            try await cluster.put("rows", "inside", ["rank": 1005], token: token)  // between r100 and r101
            expected.insert("inside", at: 101)
            try await cluster.put("rows", "beyond", ["rank": 2405], token: token)  // between r240 and r241
            expected.insert("beyond", at: expected.firstIndex(of: "r241")!)
            try await cluster.put("rows", "r5", ["rank": 99_999], token: token)  // moves to the end
            expected.removeAll { $0 == "r5" }
            expected.append("r5")
            try await cluster.delete("rows", "r0")
            expected.removeAll { $0 == "r0" }
            try await cluster.put("rows", "other", ["rank": 1], token: token)
            try await cluster.delete("rows", "other")  // created and gone: not in the result

            let firstPart = Array(expected[0..<110])
            try await eventually("the changes in the index") { try await observation.objects(in: 0..<110).map(\.id) == firstPart }
            let all = try await observation.allObjects()
            #expect(all.map(\.id) == expected, "the whole result, in order")
            #expect(try await observation.resultCount() == expected.count)
            #expect(try await observation.object(at: expected.count) == nil, "past the end")
            #expect(try await observation.objects(in: 248..<260).map(\.id) == Array(expected[248...]))

            // Once the whole result is known, a change at its end lands there too.
            try await cluster.put("rows", "last", ["rank": 1_000_000], token: token)
            expected.append("last")
            let lastIndex = expected.count - 1
            try await eventually("the new last row") { try await observation.object(at: lastIndex)?.id == "last" }
            #expect(try await observation.resultCount() == expected.count)
            observation.invalidate()
            do {
                _ = try await observation.object(at: 0)
                Issue.record("an invalidated token read")
            } catch let error as LiveError {
                #expect(error.code == .invalidArgument)
            }
        }
    }
}

/// `collection.items` with `from: "result"`: the daemon reads the query's whole result by index from its
/// cache, beyond the token's window, through the Swift client.
@Suite(.serialized) struct DaemonResultItemsTests {
    @Test func aClientReadsTheWholeResultBeyondItsWindow() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for n in 0..<150 {
            try await cluster.put("rows", "r\(n)", ["rank": .integer(n * 10)], token: token)
        }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "result-reader") { daemon in
            struct Row: Codable, Sendable { var rank: Int }
            let received = Received<LiveCollectionSnapshot<Row>>()
            let rows = try await daemon.collection("rows", sort: SortParams(field: "rank"), pageSize: 5, as: Row.self)
                .observe { received.add($0) }
            try await received.wait(for: "the window") { $0.last?.loadingStatus == .loaded }
            #expect(received.all.last?.objects.count == 5, "the window is one page")
            #expect(try await rows.resultObjects(offset: 140, limit: 20).map(\.id) == (140..<150).map { "r\($0)" })
            #expect(try await rows.object(at: 99)?.id == "r99")
            #expect(try await rows.object(at: 150) == nil)
            let answer = try await daemon.items(token: rows.notificationToken.token, offset: 0, limit: 1, from: .result)
            #expect(answer.count == 150 && answer.size == 150)

            try await cluster.put("rows", "mid", ["rank": 705], token: token)  // between r70 and r71
            try await eventually("the new row at its place in the result") { try await rows.object(at: 71)?.id == "mid" }
            #expect(try await rows.object(at: 150)?.id == "r149")

            do {
                _ = try await daemon.items(token: rows.notificationToken.token, offset: 0, limit: 1001, from: .result)
                Issue.record("a limit over 1000 was accepted")
            } catch let error as LiveGateError {
                #expect(error.code == .invalidParams)
            }
        }
    }
}
