// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import Synchronization
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
            try await cluster.put("tasks", id, ["list": "home", "rank": .integer(rank)], token: token)
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

    /// What livegatectl writes and prints is exact (Protocol/ipc, "Values"): big integers, floats, NFC and NFD names,
    /// and a filter on a number past 2^53.
    @Test func valuesGoThroughExactly() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let written = "{\"big\":10000000000000000999,\"e\":1E6,\"f\":1.0,\"n\":9007199254740993,\"\u{E9}\":1,\"e\u{301}\":2}"
        let expected = "{\"big\":10000000000000000999,\"e\":1000000.0,\"e\u{301}\":2,\"f\":1.0,\"n\":9007199254740993,\"\u{E9}\":1}"
        let put = try ctl(cluster, ["put", "values", "v1", written])
        #expect(put.status == 0, "\(put.output)")
        _ = try ctl(cluster, ["put", "values", "v2", #"{"n":9007199254740992}"#])
        let get = try ctl(cluster, ["get", "values", "v1"])
        #expect(get.status == 0 && get.output.contains(expected), "\(get.output)")
        let list = try ctl(cluster, ["list", "values", "--where", "n=9007199254740993", "--json"])
        #expect(list.status == 0 && list.output.hasPrefix(#"[{"collection":"values","data":"# + expected), "\(list.output)")
        #expect(!list.output.contains(#""v2""#), "\(list.output)")
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
        // A JSON argument that does not parse: where it went wrong, and why (nested past the daemon's limit).
        let typo = try ctl(cluster, ["put", "tasks", "t", #"{"text": hello}"#])
        #expect(typo.status == 64 && typo.output.contains("expected a value at byte 9"), "\(typo.output)")
        let deep = try ctl(cluster, ["put", "tasks", "t", #"{"a":"# + String(repeating: "[", count: 600)])
        #expect(deep.status == 64 && deep.output.contains("nested deeper than 512 levels"), "\(deep.output)")
        // 3: no daemon there.
        let away = try runToCompletion(TestCluster.binDirectory + "/livegatectl", ["status", "--socket", cluster.directory + "/none.sock"])
        #expect(away.status == 3 && away.output.contains("cannot connect"), "\(away.output)")
    }

    /// Starts livegatectl in the background; its output lines arrive on the reader until it exits.
    func background(_ cluster: TestCluster, _ arguments: [String]) throws -> (Process, LineReader) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestCluster.binDirectory + "/livegatectl")
        process.arguments = arguments + ["--socket", cluster.socketPath]
        let stdout = Pipe()
        process.standardOutput = stdout
        let lines = LineReader(stdout.fileHandleForReading)
        try process.run()
        return (process, lines)
    }

    @Test func watchingAFeedPrintsEveryChange() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let (watcher, lines) = try background(cluster, ["watch", "messages", "--feed", "--count", "2"])
        defer { if watcher.isRunning { watcher.terminate() } }
        try await eventually("the feed's subscription") { try await cluster.stats().subscriptions["collection:messages"] == 1 }
        try await cluster.put("messages", "m1", ["text": "hi"])
        try await cluster.delete("messages", "m1")
        let printed = try await withTimeout(.seconds(20), "the watcher's lines") {
            var printed: [String] = []
            for await line in lines.lines { printed.append(line) }
            return printed
        }
        #expect(printed == ["(watching every change of messages)", #"messages/m1 v1: {"text":"hi"}"#, "messages/m1 v2: deleted"], "\(printed)")
        let usage = try ctl(cluster, ["watch", "messages", "m1", "--feed"])
        #expect(usage.status == 64, "\(usage.output)")
    }

    /// `watch` follows an object across a daemon restart: it says so on stderr, reconnects once the daemon is back,
    /// shows what changed meanwhile and nothing twice, and watches on; `--no-reconnect` ends instead (exit 3).
    @Test func watchingRidesOutADaemonRestart() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await cluster.put("notes", "n1", ["t": 1])
        let (watcher, reader) = try background(cluster, ["watch", "notes", "n1"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let (ending, _) = try background(cluster, ["watch", "notes", "n1", "--no-reconnect"])
        defer { if ending.isRunning { ending.terminate() } }
        final class Printed: Sendable {
            let lines = Mutex<[String]>([])
            func withLock<R>(_ body: (inout [String]) -> R) -> R { lines.withLock { body(&$0) } }
        }
        let printed = Printed()
        let reading = Task { for await line in reader.lines { printed.withLock { $0.append(line) } } }
        defer { reading.cancel() }
        func shown(_ version: Int) async throws {
            try await eventually("v\(version) shown") { printed.withLock { $0.contains { $0.hasPrefix("notes/n1 v\(version) [fresh, loaded]") } } }
        }
        try await shown(1)

        #expect(cluster.stopDaemon() == 0)
        try await eventually("the --no-reconnect watcher to end") { !ending.isRunning }
        #expect(ending.terminationStatus == 3)
        try await cluster.put("notes", "n1", ["t": 2])
        try await cluster.put("notes", "n1", ["t": 3])
        _ = try await cluster.startDaemon()
        try await shown(3)
        try await cluster.put("notes", "n1", ["t": 4])
        try await shown(4)
        #expect(watcher.isRunning)
        let lines = printed.withLock { $0 }
        // Each version at most once fresh and loaded, in order; v1 not again after the restart.
        let versions = lines.compactMap { line -> Int? in
            guard line.hasPrefix("notes/n1 v"), line.contains("[fresh, loaded]") else { return nil }
            return Int(line.dropFirst("notes/n1 v".count).prefix { $0.isNumber })
        }
        #expect(versions == versions.sorted() && Set(versions).count == versions.count && versions.first == 1, "\(lines)")
    }

    @Test func streamsFromTheCommandLine() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--bcrypt-cost", "4", "--stream", "songs"], otherUsers: ["bob"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let grant = try ctl(cluster, ["stream", "grant", "songs", TestCluster.username, "--publishers", "bob", "alice", "--subscribers", "alice"])
        #expect(grant.status == 0 && grant.output.contains(#"{"publishers":["bob","alice"],"subscribers":["alice"]}"#), "\(grant.output)")
        let access = try ctl(cluster, ["stream", "access", "songs", TestCluster.username])
        #expect(access.output == grant.output)

        // A listener in the background, until it has printed two messages.
        let (listener, lines) = try background(cluster, ["stream", "listen", "songs", "--count", "2"])
        defer { if listener.isRunning { listener.terminate() } }
        try await eventually("the listener's subscription") { try await cluster.stats().subscriptions["stream:songs/alice"] == 1 }

        let bob = try await cluster.login(as: "bob")
        let sent = try await cluster.call(
            .POST,
            CloudPath.streamMessages("songs", user: TestCluster.username),
            json: #"{"message":{"title":"Blackbird"}}"#,
            token: bob
        )
        #expect(sent.status == 201)
        let post = try ctl(cluster, ["stream", "post", "songs", "plain text"])
        #expect(post.status == 0 && post.output.hasPrefix("sent to alice (seq "), "\(post.output)")
        let printed = try await withTimeout(.seconds(20), "the listener's two lines") {
            var printed: [String] = []
            for await line in lines.lines { printed.append(line) }
            return printed
        }
        #expect(printed.count == 2, "\(printed)")
        #expect(printed.first?.hasSuffix(#"bob → alice: {"title":"Blackbird"}"#) == true, "\(printed)")
        #expect(printed.last?.hasSuffix(#"alice → alice: "plain text""#) == true, "\(printed)")

        // A refusal is shown as a person would read it, with exit code 1.
        let refused = try ctl(cluster, ["stream", "send", "songs", "bob", "hi"])
        #expect(refused.status == 1 && refused.output.contains("alice may not send to bob on the stream songs"), "\(refused.output)")
    }
}
