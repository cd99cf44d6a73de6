// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Testing

/// `livegatectl` against the real daemon: reads, writes, collections, and its documented exit codes.
@Suite(.serialized) struct LivegatectlTests {
    func ctl(_ cluster: TestCluster, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try runToCompletion(TestCluster.binDirectory + "/livegatectl", arguments + ["--socket", cluster.socketPath])
    }

    @Test func readsWritesAndListsThroughTheDaemon() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        for (id, rank) in [("a", 3), ("b", 1), ("c", 2)] {
            try await cluster.put("tasks", id, ["list": "home", "rank": .number(Double(rank))], token: token)
        }
        let get = try ctl(cluster, ["get", "tasks", "a"])
        #expect(get.status == 0 && get.output.contains("tasks/a v1 [fresh, loaded]"), "\(get.output)")

        let patch = try ctl(cluster, ["patch", "tasks", "a", #"{"done":true}"#])
        #expect(patch.status == 0 && patch.output.contains("version 2"), "\(patch.output)")
        #expect(try await cluster.get("tasks", "a").data["done"] == true)

        let list = try ctl(cluster, ["list", "tasks", "--where", #"list="home""#, "--sort", "rank", "--page-size", "2", "--pages", "2"])
        #expect(list.status == 0, "\(list.output)")
        let lines = list.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "3 of 3 [fresh, loaded]", "\(list.output)")
        #expect(lines.dropFirst().map { $0.split(separator: " ").prefix(2).joined(separator: " ") } == ["0: b", "1: c", "2: a"], "\(list.output)")

        let json = try ctl(cluster, ["list", "tasks", "--sort", "rank", "--descending", "--page-size", "1", "--json"])
        #expect(json.output.hasPrefix(#"[{"collection":"tasks","data":{"done":true,"list":"home","rank":3},"id":"a""#), "\(json.output)")
    }

    @Test func exitCodesSayWhatWentWrong() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        // 1: the daemon answered with an error.
        let missing = try ctl(cluster, ["get", "tasks", "nothing"])
        #expect(missing.status == 1, "\(missing.output)")
        let bad = try ctl(cluster, ["list", "tasks", "--where", #"a.b=1"#])
        #expect(bad.status == 1 && bad.output.contains("not a field name"), "\(bad.output)")
        // 64 (EX_USAGE): usage.
        let usage = try ctl(cluster, ["list", "tasks", "--where", "nonsense"])
        #expect(usage.status == 64 && usage.output.contains("FIELD=JSON"), "\(usage.output)")
        // 3: no daemon there.
        let away = try runToCompletion(TestCluster.binDirectory + "/livegatectl", ["status", "--socket", cluster.directory + "/none.sock"])
        #expect(away.status == 3 && away.output.contains("cannot connect"), "\(away.output)")
    }
}
