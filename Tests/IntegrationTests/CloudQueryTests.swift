// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import SeededRandom
import Testing

/// Queries over the cloud's REST API: equality filters, order, cursor pages both ways, bad input.
@Suite(.serialized) struct CloudQueryTests {
    func page(_ cluster: TestCluster, _ token: String, _ collection: String, _ parameters: String) async throws -> QueryPage {
        let response = try await cluster.call(.GET, CloudPath.objects(collection) + "?" + parameters, token: token)
        #expect(response.status == 200, "\(parameters): \(response.body)")
        return try JSONDecoder().decode(QueryPage.self, from: Data(response.body.utf8))
    }

    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    @Test func filtersSortsAndPagesBothWays() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        // 25 messages in channel c1 with ranks 24…0 (so rank order is the reverse of id order), 5 in c2.
        for n in 0..<25 {
            try await cluster.put("messages", String(format: "m%02d", n), ["channel": "c1", "rank": .integer(24 - n)], token: token)
        }
        for n in 0..<5 { try await cluster.put("messages", "x\(n)", ["channel": "c2", "rank": .integer(n)], token: token) }
        let filter = "where=" + Self.encoded(#"{"channel":"c1"}"#)

        let first = try await page(cluster, token, "messages", filter + "&sort=rank&limit=10")
        #expect(first.count == 25)
        #expect(first.items.map(\.id) == (15...24).reversed().map { String(format: "m%02d", $0) })
        #expect(first.previousCursor == nil)
        let cursor = try #require(first.nextCursor)

        // A concurrent insert before the cursor does not shift the next page.
        try await cluster.put("messages", "early", ["channel": "c1", "rank": -1], token: token)
        let second = try await page(cluster, token, "messages", filter + "&sort=rank&limit=10&after=" + cursor)
        #expect(second.items.map(\.id) == (5...14).reversed().map { String(format: "m%02d", $0) })
        #expect(second.count == 26)
        let third = try await page(cluster, token, "messages", filter + "&sort=rank&limit=10&after=" + (second.nextCursor ?? ""))
        #expect(third.items.map(\.id) == (0...4).reversed().map { String(format: "m%02d", $0) })
        #expect(third.nextCursor == nil)

        // Backwards from the end (descending rank: m00 first, "early" last), and to the page before.
        let last = try await page(cluster, token, "messages", filter + "&sort=-rank&limit=4&last=true")
        #expect(last.items.map(\.id) == ["m22", "m23", "m24", "early"])
        let beforeLast = try await page(cluster, token, "messages", filter + "&sort=-rank&limit=4&before=" + (last.previousCursor ?? ""))
        #expect(beforeLast.items.map(\.id) == ["m18", "m19", "m20", "m21"])
        #expect(beforeLast.nextCursor != nil && beforeLast.previousCursor != nil)

        // Without a sort, ids in byte order; deleted objects are not in results.
        try await cluster.delete("messages", "x1")
        let others = try await page(cluster, token, "messages", "where=" + Self.encoded(#"{"channel":"c2"}"#))
        #expect(others.items.map(\.id) == ["x0", "x2", "x3", "x4"])
        #expect(try await cluster.stats().fetches.keys.contains { $0.hasPrefix("query:") })
    }

    @Test func filterValuesAreTyped() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("t", "a", ["flag": true, "n": 1], token: token)
        try await cluster.put("t", "b", ["flag": 1, "n": "1"], token: token)
        try await cluster.put("t", "c", ["n": .null], token: token)
        try await cluster.put("t", "d", [:], token: token)
        func ids(_ whereJSON: String) async throws -> [String] {
            try await page(cluster, token, "t", "where=" + Self.encoded(whereJSON)).items.map(\.id)
        }
        #expect(try await ids(#"{"flag":true}"#) == ["a"])
        #expect(try await ids(#"{"flag":1}"#) == ["b"])
        #expect(try await ids(#"{"n":1}"#) == ["a"])
        #expect(try await ids(#"{"n":"1"}"#) == ["b"])
        #expect(try await ids(#"{"n":null}"#) == ["c", "d"])
        // Mixed kinds sort as specified: missing/null, numbers, strings.
        let sorted = try await page(cluster, token, "t", "sort=n").items.map(\.id)
        #expect(sorted == ["c", "d", "a", "b"])
        let query = CollectionQuery(collection: "t", sort: QuerySort(field: "n"))
        let entities = try await page(cluster, token, "t", "sort=n").items
        #expect(entities.sorted { query.areInIncreasingOrder(query.position(of: $0), query.position(of: $1)) }.map(\.id) == sorted)
    }

    /// The indexes made on demand (the first sorted or filtered query makes them) and the kept counts give
    /// what the order and the filters specify: every kind of value in its place, pages both ways through the
    /// cursors, the count exact after deletions and re-creations.
    @Test func indexedQueriesKeepTheSpecifiedOrderAndCountsExactly() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let values: [JSONValue?] = [
            nil, .null, false, true, -2.5, 0, 1, 1.5, 1e6, "", "a", "b", "ab", "é", [1, 2], ["a"], ["k": 1], ["a": ["b": 2]],
        ]
        var live: Set<String> = []
        for (n, value) in values.enumerated() {
            for copy in 0..<2 {
                var data: [String: JSONValue] = ["kind": .string(n % 2 == 0 ? "even" : "odd"), "copy": .integer(copy)]
                if let value { data["v"] = value }
                let id = "o\(n)-\(copy)"
                try await cluster.put("ix", id, .object(JSONObject(data)), token: token)
                live.insert(id)
            }
        }
        // Deleted, deleted and created again, deleted twice: the kept count follows.
        _ = try await cluster.delete("ix", "o0-0")
        _ = try await cluster.delete("ix", "o1-0")
        try await cluster.put("ix", "o1-0", ["kind": "odd", "copy": 0, "v": .null], token: token)
        #expect(try await cluster.call(.DELETE, CloudPath.object(EntityKey(collection: "ix", id: "o0-0")), token: token).status == 404)
        live.remove("o0-0")

        for sort in ["v", "-v"] {
            let query = CollectionQuery(collection: "ix", sort: QuerySort(field: "v", descending: sort.hasPrefix("-")))
            // Forward, three at a time, through the cursors.
            var forward: [Entity] = []
            var cursor: String?
            repeat {
                let next = try await page(cluster, token, "ix", "sort=\(sort)&limit=3" + (cursor.map { "&after=" + $0 } ?? ""))
                #expect(next.count == live.count, "the kept count")
                forward += next.items
                cursor = next.nextCursor
            } while cursor != nil
            #expect(Set(forward.map(\.id)) == live && forward.count == live.count)
            let specified = forward.sorted { query.areInIncreasingOrder(query.position(of: $0), query.position(of: $1)) }
            #expect(forward.map(\.id) == specified.map(\.id), "\(sort): the order of CollectionQuery")
            // Backward from the last page.
            var last = try await page(cluster, token, "ix", "sort=\(sort)&limit=4&last=true")
            var backward = last.items
            while let previous = last.previousCursor {
                last = try await page(cluster, token, "ix", "sort=\(sort)&limit=4&before=" + previous)
                backward = last.items + backward
            }
            #expect(backward.map(\.id) == forward.map(\.id), "\(sort): the same pages backward")
        }

        // Filters on every kind (their index made by the first), sorted, counted.
        let all = try await page(cluster, token, "ix", "limit=100").items
        for filter in [#"{"v":true}"#, #"{"v":false}"#, #"{"v":1}"#, #"{"v":"a"}"#, #"{"v":null}"#, #"{"kind":"odd"}"#, #"{"kind":"odd","v":1.5}"#] {
            let whereValue = try JSONDecoder().decode([String: JSONValue].self, from: Data(filter.utf8))
            let query = CollectionQuery(collection: "ix", where: whereValue, sort: QuerySort(field: "v"))
            let result = try await page(cluster, token, "ix", "where=" + Self.encoded(filter) + "&sort=v&limit=100")
            let expected = all.filter { query.matches($0) }.sorted { query.areInIncreasingOrder(query.position(of: $0), query.position(of: $1)) }
            #expect(result.items.map(\.id) == expected.map(\.id), "\(filter)")
            #expect(result.count == expected.count, "\(filter)")
        }
    }

    /// A filtered query's count is kept between writes to its collection (the cloud's `FilteredCounts`): over a
    /// seeded schedule of creations, changes of the filtered field, deletions and writes to another collection,
    /// the count of every page, taken after each write, is the model's (each value's live objects).
    @Test func filteredCountsFollowEveryWrite() async throws {
        let seed = ProcessInfo.processInfo.environment["LIVEGATE_QUERY_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1..<(1 << 53))
        var random = SeededGenerator(seed: seed)
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let channels = ["c1", "c2", "c3"]
        var model: [String: String] = [:]
        for step in 0..<48 {
            let id = "o\(random.next() % 10)"
            let channel = channels[Int(random.next() % 3)]
            switch random.next() % 5 {
            case 0, 1, 2:
                try await cluster.put("fc", id, ["channel": .string(channel)], token: token)
                model[id] = channel
            case 3:
                let status = try await cluster.call(.DELETE, CloudPath.object(EntityKey(collection: "fc", id: id)), token: token).status
                #expect(status == (model[id] == nil ? 404 : 200), "seed \(seed), step \(step): deleting \(id)")
                model[id] = nil
            default:
                // Another collection's write: on SQLite this one's kept counts are given back after it, on
                // PostgreSQL they are counted again (its check is the log's last event).
                try await cluster.put("fc-other", id, ["channel": .string(channel)], token: token)
            }
            for value in channels {
                let filter = "where=" + Self.encoded(#"{"channel":"\#(value)"}"#)
                let first = try await page(cluster, token, "fc", filter + "&limit=2")
                let expected = model.values.count { $0 == value }
                #expect(first.count == expected, "seed \(seed), step \(step): the count of \(value)")
                if let cursor = first.nextCursor {
                    let next = try await page(cluster, token, "fc", filter + "&limit=2&after=" + cursor)
                    #expect(next.count == expected, "seed \(seed), step \(step): the count of \(value), second page")
                }
            }
        }
    }

    @Test func badQueriesAreRefusedWithReasons() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        for parameters in [
            "limit=0", "limit=101", "limit=ten", "after=not-a-cursor", "where=%7B", "where=%5B1%5D",
            "where=" + Self.encoded(#"{"a.b":1}"#), "where=" + Self.encoded(#"{"a":[1]}"#), "sort=1abc",
            "sort=" + Self.encoded("x'--"), "colour=red", "last=yes", "last=true&after=abc",
        ] {
            let response = try await cluster.call(.GET, CloudPath.objects("t") + "?" + parameters, token: token)
            #expect(response.status == 400, "\(parameters)")
            let error = try? JSONDecoder().decode(ErrorResponse.self, from: Data(response.body.utf8))
            #expect(error?.error.code == .badRequest, "\(parameters): \(response.body)")
        }
        #expect(try await cluster.call(.GET, CloudPath.objects("t")).status == 401)
    }
}

/// `livegate-cloud seed --demo`: the social model as data, written once.
@Suite struct CloudSeedTests {
    @Test func theDemoSeedWritesTheSocialModelOnce() throws {
        var template = Array("/tmp/lgseed-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed") }
        let database = String(cString: made) + "/cloud.sqlite"
        defer { try? FileManager.default.removeItem(atPath: String(cString: made)) }
        let first = try runToCompletion(TestCluster.binDirectory + "/livegate-cloud", ["seed", "--demo", "--database", database])
        #expect(first.status == 0 && first.output.contains("seeded 28 objects"), "\(first.output)")
        let again = try runToCompletion(TestCluster.binDirectory + "/livegate-cloud", ["seed", "--demo", "--database", database])
        #expect(again.status == 0 && again.output.contains("seeded 0 objects"), "objects that exist are left as they are: \(again.output)")
    }
}
