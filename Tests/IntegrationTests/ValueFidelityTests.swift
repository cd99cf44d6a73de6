// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveJSON
import NIOHTTP1
import Testing

/// Values read back exactly as written (Protocol/ipc and Protocol/cloud, "Values"), through the real daemon and
/// cloud (on SQLite, and on PostgreSQL in the second pass), by their text on the wire: written through the daemon
/// or the cloud's REST API, read back from the daemon's answer, its observers, the cloud's `GET` and the Swift
/// client.
@Suite(.serialized) struct ValueFidelityTests {
    /// A value written (as `v`) → its text read back everywhere (the canonical form: Protocol/ipc, "Values").
    static let cases: [(written: String, readBack: String)] = [
        ("9007199254740993", "9007199254740993"),
        ("9223372036854775807", "9223372036854775807"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("10000000000000000999", "10000000000000000999"),
        ("-123123123123123123123123123123", "-123123123123123123123123123123"),
        ("1.0", "1.0"),
        ("1E6", "1000000.0"),
        ("1.50", "1.50"),
        ("-0", "0"),
        (#"{"a":1,"a":2}"#, #"{"a":2}"#),
        ("{\"\u{E9}\":1,\"e\u{301}\":2}", "{\"e\u{301}\":2,\"\u{E9}\":1}"),
        ("{\"\u{C5}\":1,\"A\u{30A}\":2,\"\u{212B}\":3}", "{\"A\u{30A}\":2,\"\u{C5}\":1,\"\u{212B}\":3}"),
    ]

    static let hello = #"{"jsonrpc":"2.0","id":10000000000000000999,"method":"hello","params":{"client":"fidelity","protocol":1}}"#

    /// The first line the client read that contains every one of `fragments`, waited for.
    static func line(_ client: LineClient, containing fragments: String...) async throws -> String {
        let matches: @Sendable (String) -> Bool = { line in fragments.allSatisfy { line.contains($0) } }
        try await eventually("a line with \(fragments)") { client.lines.contains(where: matches) }
        return client.lines.first(where: matches)!
    }

    @Test func valuesWrittenThroughTheDaemonReadBackExactlyEverywhere() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let client = try await LineClient.connect(cluster.socketPath, greeting: Self.hello + "\n")
        defer { Task { await client.close() } }
        // JSON-RPC 2.0: the answer's id is the request's, as it was sent.
        let helloAnswer = try await Self.line(client, containing: #""result""#)
        #expect(helloAnswer.contains(#""id":10000000000000000999"#), "\(helloAnswer)")
        let token = try await cluster.login()
        for (index, (written, readBack)) in Self.cases.enumerated() {
            let id = "d\(index)"
            let data = #"{"v":\#(written)}"#
            let expected = #"{"v":\#(readBack)}"#
            try await client.send(
                #"{"jsonrpc":"2.0","id":"w\#(index)","method":"object.update","params":{"collection":"fid","id":"\#(id)","data":\#(data)}}"# + "\n"
            )
            let answer = try await Self.line(client, containing: #""id":"w\#(index)""#)
            #expect(answer.contains(#""data":\#(expected)"#), "written \(written): answered \(answer)")
            // The cloud holds it as it was written.
            let stored = try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "fid", id: id)), token: token)
            #expect(stored.body.contains(#""data":\#(expected)"#), "written \(written): the cloud holds \(stored.body)")
            // An observer that reads it from the cloud (freshOnly) sees it as it was written.
            try await client.send(
                #"{"jsonrpc":"2.0","id":"o\#(index)","method":"object.observe","params":{"collection":"fid","id":"\#(id)","policy":"freshOnly"}}"#
                    + "\n"
            )
            let changed = try await Self.line(client, containing: #""method":"object.changed""#, #""id":"\#(id)","updatedAt""#)
            #expect(changed.contains(#""data":\#(expected)"#), "written \(written): observed \(changed)")
        }
        // The Swift client hands over the value exactly.
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fidelity-swift") { connection in
            let changes = Queue(try await connection.observeObject(collection: "fid", id: "d3").changes)
            let fresh = try await change(changes, "fresh d3") { $0.dataStatus == .fresh }
            #expect(fresh.snapshot?.data["v"]?.numberText == "10000000000000000999")
        }
    }

    @Test func valuesWrittenThroughTheCloudReadBackExactlyThroughTheDaemon() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        for (index, (written, readBack)) in Self.cases.enumerated() {
            let put = try await cluster.call(
                .PUT,
                CloudPath.object(EntityKey(collection: "fid", id: "c\(index)")),
                json: #"{"data":{"v":\#(written)}}"#,
                token: token,
                headers: [("Content-Type", "application/json")]
            )
            #expect(put.body.contains(#""data":{"v":\#(readBack)}"#), "written \(written): answered \(put.body)")
        }
        let client = try await LineClient.connect(cluster.socketPath, greeting: Self.hello + "\n")
        defer { Task { await client.close() } }
        for (index, (written, readBack)) in Self.cases.enumerated() {
            try await client.send(
                #"{"jsonrpc":"2.0","id":"o\#(index)","method":"object.observe","params":{"collection":"fid","id":"c\#(index)"}}"# + "\n"
            )
            let changed = try await Self.line(
                client,
                containing: #""method":"object.changed""#,
                #""id":"c\#(index)","updatedAt""#,
                #""dataStatus":"fresh""#
            )
            #expect(changed.contains(#""data":{"v":\#(readBack)}"#), "written \(written): observed \(changed)")
        }
    }

    /// Filters and sorts compare numbers by their exact value, on either store.
    @Test func queriesFindAndOrderNumbersBeyond2To53Exactly() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        let numbers = ["9007199254740993", "9007199254740992", "9007199254740994", "1.0", "1", "-9223372036854775808"]
        for (index, number) in numbers.enumerated() {
            let put = try await cluster.call(
                .PUT,
                CloudPath.object(EntityKey(collection: "big", id: "b\(index)")),
                json: #"{"data":{"n":\#(number)}}"#,
                token: token
            )
            #expect(put.status == 201 || put.status == 200, "\(put)")
        }
        func ids(_ query: String) async throws -> [String] {
            let page = try await cluster.call(.GET, "/v1/collections/big/objects?" + query, token: token)
            let decoded = try CloudJSON.decode(QueryPage.self, from: page.body)
            return decoded.items.map(\.id)
        }
        let filter = "{\"n\":9007199254740993}".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        #expect(try await ids("where=" + filter) == ["b0"])
        // `1` and `1.0` are the same value.
        let one = "{\"n\":1}".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        #expect(try await ids("where=" + one) == ["b3", "b4"])
        #expect(try await ids("sort=n") == ["b5", "b3", "b4", "b1", "b0", "b2"])
        #expect(try await ids("sort=-n") == ["b2", "b0", "b1", "b4", "b3", "b5"])
        // The same through the daemon's query window.
        let client = try await LineClient.connect(cluster.socketPath, greeting: Self.hello + "\n")
        defer { Task { await client.close() } }
        try await client.send(
            #"{"jsonrpc":"2.0","id":"q","method":"collection.observe","params":{"collection":"big","query":{"where":{"n":9007199254740993}}}}"#
                + "\n"
        )
        let window = try await Self.line(client, containing: #""method":"collection.changed""#, #""id":"b0""#)
        #expect(!window.contains(#""id":"b1""#) && window.contains(#""count":1"#), "\(window)")
    }
}
