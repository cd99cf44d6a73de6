// Licensed under the Apache License, Version 2.0.

import CJSONC
import CLiveGate
import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What the C callback saw, one JSON text per `object.changed`.
private final class Seen {
    var changes: [String] = []
}

private let recordChange: lg_object_callback = { _, _, params, userdata in
    let seen = Unmanaged<Seen>.fromOpaque(userdata!).takeUnretainedValue()
    seen.changes.append(String(cString: json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN)))
}

/// Records each stream notification as "METHOD PARAMS".
private let recordStream: lg_stream_callback = { _, _, method, params, userdata in
    let seen = Unmanaged<Seen>.fromOpaque(userdata!).takeUnretainedValue()
    seen.changes.append(String(cString: method!) + " " + String(cString: json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN)))
}

/// Polls the client's descriptor and dispatches until `condition` holds, for at most `seconds`.
private let recordWindow: lg_collection_callback = { _, _, params, _, userdata in
    let seen = Unmanaged<Seen>.fromOpaque(userdata!).takeUnretainedValue()
    seen.changes.append(String(cString: json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN)))
}

/// Dispatches until lg_dispatch reports the connection closed (the daemon went away), for at most 20 s.
private func dispatchUntilClosed(_ client: OpaquePointer) -> Bool {
    for _ in 0..<100 {
        var descriptor = pollfd(fd: lg_fd(client), events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, 200)
        if lg_dispatch(client) < 0 { return true }
    }
    return false
}

private func dispatch(_ client: OpaquePointer, _ seen: Seen, seconds: Double = 20, until condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        let remaining = deadline.timeIntervalSinceNow
        if remaining <= 0 { return false }
        var descriptor = pollfd(fd: lg_fd(client), events: Int16(POLLIN), revents: 0)
        if lg_has_pending(client) != 0 || poll(&descriptor, 1, Int32(remaining * 1000)) > 0, lg_dispatch(client) < 0 {
            return condition()
        }
    }
    return true
}

@Suite(.serialized) struct CClientTests {
    @Test func observeWriteAndInvalidateThroughTheCLibrary() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await cluster.put("notes", "c1", ["text": "v1"])

        var error: UnsafeMutablePointer<CChar>?
        let client = try #require(lg_connect(cluster.socketPath, "c-test", &error), "lg_connect: \(error.map { String(cString: $0) } ?? "?")")
        defer { lg_disconnect(client) }
        let seen = Seen()
        let token = withExtendedLifetime(seen) {
            lg_observe_object(client, "notes", "c1", 0, recordChange, Unmanaged.passUnretained(seen).toOpaque())
        }
        #expect(token == 1)
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""dataStatus":"fresh""#) && $0.contains(#""version":1"#) } })

        try await cluster.put("notes", "c1", ["text": "v2"])
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""version":2"#) } })

        let version = lg_update_object(client, "notes", "c1", #"{"text":"from C"}"#)
        #expect(version == 3)
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""from C""#) } })
        #expect(seen.changes.allSatisfy { $0.hasPrefix(#"{ "token": 1"#) || $0.hasPrefix(#"{"token":1"#) })

        #expect(lg_update_object(client, "notes", "c1", "[1]") == -1)
        #expect(lg_last_error_code(client) == -32602)

        #expect(lg_invalidate(client, token) == 0)
        #expect(lg_invalidate(client, token) == -1)
        #expect(lg_last_error_code(client) == -32001)
        #expect(String(cString: lg_last_error(client)).contains("no token 1"))
        withExtendedLifetime(seen) {}
    }

    /// Values written through the C library and read back through it exactly (README.md, "Values"): integers past
    /// int64_t and uint64_t as their text (json-c would saturate them), floats as written, NFC and NFD names apart.
    @Test func valuesRoundTripExactlyThroughTheCLibrary() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        var error: UnsafeMutablePointer<CChar>?
        let client = try #require(lg_connect(cluster.socketPath, "c-values", &error), "lg_connect: \(error.map { String(cString: $0) } ?? "?")")
        defer { lg_disconnect(client) }
        let written =
            "{\"big\":10000000000000000999,\"e\":1E6,\"f\":1.0,\"id\":9007199254740993,\"list\":[-123123123123123123123123123123,1],"
            + "\"max\":9223372036854775807,\"min\":-9223372036854775808,\"neg\":-123123123123123123123123123123,\"u\":18446744073709551616,"
            + "\"\u{E9}\":1,\"e\u{301}\":2}"
        let expected =
            "{\"big\":10000000000000000999,\"e\":1000000.0,\"e\u{301}\":2,\"f\":1.0,\"id\":9007199254740993,"
            + "\"list\":[-123123123123123123123123123123,1],\"max\":9223372036854775807,\"min\":-9223372036854775808,"
            + "\"neg\":-123123123123123123123123123123,\"u\":18446744073709551616,\"\u{E9}\":1}"
        #expect(lg_update_object(client, "values", "c1", written) == 1, "\(String(cString: lg_last_error(client)))")
        // The cloud holds what was written (the library sent it exactly).
        let stored = try await cluster.get("values", "c1")
        var writer = JSONWriter()
        try writer.write(stored.data)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
        // Read back through the library: its json-c values write back as the daemon sent them.
        let seen = Seen()
        _ = withExtendedLifetime(seen) {
            lg_observe_object(client, "values", "c1", 0, recordChange, Unmanaged.passUnretained(seen).toOpaque())
        }
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""dataStatus":"fresh""#) } })
        let fresh = try #require(seen.changes.first { $0.contains(#""dataStatus":"fresh""#) })
        #expect(fresh.contains(#""data":"# + expected), "\(fresh)")
        withExtendedLifetime(seen) {}
    }

    @Test func streamsThroughTheCLibrary() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--bcrypt-cost", "4", "--stream", "songs"], otherUsers: ["bob"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let bob = try await cluster.login(as: "bob")
        #expect(
            try await cluster.call(
                .PUT,
                CloudPath.streamACL("songs", user: "bob"),
                json: #"{"publishers":["bob"],"subscribers":["alice"]}"#,
                token: bob
            )
            .status == 200
        )
        var error: UnsafeMutablePointer<CChar>?
        let client = try #require(lg_connect(cluster.socketPath, "c-test", &error), "lg_connect: \(error.map { String(cString: $0) } ?? "?")")
        defer { lg_disconnect(client) }
        let seen = Seen()
        let userdata = Unmanaged.passUnretained(seen).toOpaque()
        // Following bob: his posts arrive through the callback.
        let token = withExtendedLifetime(seen) { lg_stream_listen(client, "songs", "bob", recordStream, userdata) }
        #expect(token == 1, "\(String(cString: lg_last_error(client)))")
        let sent = try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":{"n":1}}"#, token: bob)
        #expect(sent.status == 201)
        #expect(
            dispatch(client, seen) { seen.changes.contains { $0.hasPrefix("stream.message ") && $0.contains(#""message":{"n":1}"#) } },
            "\(seen.changes)"
        )
        #expect(seen.changes.first?.contains(#""from":"bob""#) == true)

        // Refusals: alice is not among bob's publishers; carol is no one alice may follow; nothing called "jazz".
        #expect(lg_stream_send(client, "songs", "bob", #""hi""#) == -1)
        #expect(lg_last_error_code(client) == -32002)
        #expect(String(cString: lg_last_error(client)).contains("alice may not send to bob"))
        #expect(lg_stream_listen(client, "jazz", nil, recordStream, userdata) == -1)
        #expect(lg_last_error_code(client) == -32006)
        #expect(lg_stream_send(client, "songs", nil, "not json") == -1)
        #expect(lg_last_error_code(client) == -32602)

        // Alice posts to her own followers: with her ACL letting herself publish, the post is accepted.
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "grant") { daemon in
            _ = try await daemon.grantAccess(stream: "songs", user: TestCluster.username, acl: StreamAccess(publishers: [TestCluster.username]))
        }
        #expect(lg_stream_send(client, "songs", nil, #"{"from":"C"}"#) > 0, "\(String(cString: lg_last_error(client)))")
        #expect(lg_invalidate(client, token) == 0)
        try await eventually("the unfollow releases the cloud subscription") {
            try await cluster.stats().subscriptions["stream:songs/bob"] == nil
        }
        withExtendedLifetime(seen) {}
    }

    @Test func aDaemonRestartMidObservationIsResumedByReconnecting() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "cr", ["v": 1])
        var error: UnsafeMutablePointer<CChar>?
        let client = try #require(lg_connect(cluster.socketPath, "c-test", &error))
        defer { lg_disconnect(client) }
        let seen = Seen()
        let userdata = Unmanaged.passUnretained(seen).toOpaque()
        let token = withExtendedLifetime(seen) { lg_observe_object(client, "notes", "cr", 0, recordChange, userdata) }
        try await cluster.put("notes", "cr", ["v": 2])
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""version":2"#) } })

        // The daemon goes away: dispatch reports the closed connection.
        #expect(cluster.stopDaemon() == 0)
        #expect(dispatchUntilClosed(client))
        #expect(lg_reconnect(client) == -1, "no daemon yet: one attempt, an error")
        try await cluster.startDaemon()
        #expect(lg_reconnect(client) == 0, "\(String(cString: lg_last_error(client)))")
        let before = seen.changes.count
        try await cluster.put("notes", "cr", ["v": 3])
        #expect(dispatch(client, seen) { seen.changes.contains { $0.contains(#""version":3"#) } })
        let after = Array(seen.changes.dropFirst(before))
        #expect(!after.contains { $0.contains(#""version":2"#) || $0.contains(#""version":1"#) }, "nothing delivered twice: \(after)")
        #expect(after.allSatisfy { $0.contains(#""token":\#(token)"#) }, "the same token as before: \(after)")
        #expect(lg_invalidate(client, token) == 0)
        withExtendedLifetime(seen) {}
    }

    @Test func aCollectionWindowGetsItsPagesBackAfterReconnecting() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for n in 0..<5 { try await cluster.put("chat", "m\(n)", ["room": "r1", "at": .integer(n * 10)], token: token) }
        var error: UnsafeMutablePointer<CChar>?
        let client = try #require(lg_connect(cluster.socketPath, "c-pages", &error))
        defer { lg_disconnect(client) }
        let seen = Seen()
        let userdata = Unmanaged.passUnretained(seen).toOpaque()
        let window = withExtendedLifetime(seen) {
            lg_observe_collection(client, "chat", #"{"where":{"room":"r1"},"sort":{"field":"at"}}"#, 2, 0, 0, recordWindow, userdata)
        }
        func ids() -> [String] {
            (0..<lg_collection_size(client, window)).compactMap { index in
                guard let item = lg_collection_item(client, window, index), let id = json_object_object_get(item, "id") else { return nil }
                return String(cString: json_object_get_string(id))
            }
        }
        #expect(dispatch(client, seen) { ids() == ["m0", "m1"] })
        #expect(lg_collection_page(client, window, LG_PAGE_NEXT) == 1)
        #expect(dispatch(client, seen) { ids() == ["m0", "m1", "m2", "m3"] })

        // The daemon restarts; meanwhile m1 is deleted. Reconnected, the window has its two pages again.
        #expect(cluster.stopDaemon() == 0)
        #expect(dispatchUntilClosed(client))
        try await cluster.delete("chat", "m1")
        try await cluster.startDaemon()
        #expect(lg_reconnect(client) == 0, "\(String(cString: lg_last_error(client)))")
        #expect(dispatch(client, seen) { ids() == ["m0", "m2", "m3", "m4"] }, "\(ids())")

        // The whole result by index, beyond the window, from the daemon's cache.
        var count: Int64 = 0
        let result = try #require(lg_collection_result(client, window, 3, 10, &count), "\(String(cString: lg_last_error(client)))")
        defer { json_object_put(result) }
        let tail = (0..<json_object_array_length(result)).map { index in
            String(cString: json_object_get_string(json_object_object_get(json_object_array_get_idx(result, index), "id")))
        }
        #expect(tail == ["m4"] && count == 4, "\(tail) of \(count)")
        #expect(lg_invalidate(client, window) == 0)
        withExtendedLifetime(seen) {}
    }

    @Test func connectingToNothingIsAClearError() {
        var error: UnsafeMutablePointer<CChar>?
        let client = lg_connect("/nonexistent/livegate.sock", "c-test", &error)
        #expect(client == nil)
        let message = error.map { String(cString: $0) } ?? ""
        free(error)
        #expect(message.contains("cannot connect to livegated at /nonexistent/livegate.sock"))
    }
}

/// The package's root directory (sources, scripts, Protocol/), from this file's place in it.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

private var valgrindAvailable: Bool {
    FileManager.default.isExecutableFile(atPath: "/usr/bin/valgrind") && FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")
}

/// The C example program, built by the system compiler as the installed library is, run under valgrind
/// against the real daemon: it must see the live updates and end with no invalid access and no leak.
@Suite(.serialized, .enabled(if: valgrindAvailable, "needs valgrind and cc")) struct CExampleValgrindTests {
    /// Runs a shell command line to completion; returns its exit status and output.
    func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runToCompletion("/bin/sh", ["-c", arguments.joined(separator: " ")])
    }

    /// Builds the example with -Werror, runs it under valgrind with `arguments`, hands each output line to
    /// `onLine` (which may act on the cluster), and checks valgrind's report. Returns the lines.
    func runExampleUnderValgrind(
        _ cluster: TestCluster,
        _ arguments: [String],
        onLine: @escaping @Sendable (String) async throws -> Void
    ) async throws -> [String] {
        let example = cluster.directory + "/livegate-c-example"
        let build = try run([
            "cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror",
            "-I", packageRoot + "/Sources/CLiveGate/include",
            packageRoot + "/Sources/CLiveGate/livegate.c", packageRoot + "/Sources/livegate-c-example/main.c",
            "$(pkg-config --cflags --libs json-c)", "-o", example,
        ])
        #expect(build.status == 0, "\(build.output)")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
        process.arguments =
            [
                "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                example, "--socket", cluster.socketPath,
            ] + arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        let lines = LineReader(stdout.fileHandleForReading)
        try process.run()
        // Whatever happens below, the example does not outlive the test.
        defer { if process.isRunning { process.terminate() } }
        let collected = ClusterBox<[String]>()
        try await withTimeout(.seconds(60), "the example to finish") {
            var seen: [String] = []
            for await line in lines.lines {
                seen.append(line)
                try await onLine(line)
            }
            collected.set(seen)
        }
        // Its stdout has closed: it is exiting (valgrind writes its report first).
        let report = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(report)")
        #expect(report.contains("ERROR SUMMARY: 0 errors"), "\(report)")
        #expect(report.contains("All heap blocks were freed") || report.contains("definitely lost: 0 bytes"), "\(report)")
        return collected.get() ?? []
    }

    @Test func theExampleWatchesLiveUpdatesCleanlyUnderValgrind() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "cv", ["v": 1])
        let wrote = ClusterBox<Bool>()
        let seen = try await runExampleUnderValgrind(cluster, ["--until-version", "3", "notes", "cv"]) { line in
            if wrote.get() == nil, line.contains(#""dataStatus":"fresh""#) {
                wrote.set(true)
                try await cluster.put("notes", "cv", ["v": 2])
                try await cluster.put("notes", "cv", ["v": 3])
            }
        }
        #expect(seen.contains { $0.contains(#""version":3"#) }, "\(seen)")
        #expect(seen.allSatisfy { $0.hasPrefix(#"{"token":1,"#) })
    }

    @Test func theExamplePagesACollectionAndAppliesLiveChangesUnderValgrind() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for n in 0..<5 { try await cluster.put("chat", "m\(n)", ["room": "r1", "at": .integer(n * 10)], token: token) }
        let wrote = ClusterBox<Bool>()
        let arguments = [
            "--query", #"{"where":{"room":"r1"},"sort":{"field":"at"}}"#, "--page-size", "2", "--pages", "3", "--until-size", "6",
            "chat",
        ]
        let seen = try await runExampleUnderValgrind(cluster, arguments) { line in
            // Three pages asked for, the whole result loaded: another device adds a message in the middle.
            if wrote.get() == nil, line.contains(#""ids":["m0","m1","m2","m3","m4"]"#) {
                wrote.set(true)
                try await cluster.put("chat", "m15", ["room": "r1", "at": 15], token: token)
            }
        }
        #expect(seen.contains(#"{"ids":["m0","m1","m2","m3"],"count":5,"size":4}"#), "\(seen)")
        #expect(seen.contains(#"{"ids":["m0","m1","m2","m3","m4"],"count":5,"size":5}"#), "\(seen)")
        #expect(seen.last == #"{"ids":["m0","m1","m15","m2","m3","m4"],"count":6,"size":6}"#, "\(seen)")
    }

    @Test func theExampleRidesOutADaemonRestartUnderValgrind() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "rr", ["v": 1])
        let restarted = ClusterBox<Bool>()
        let seen = try await runExampleUnderValgrind(cluster, ["--until-version", "2", "--reconnect", "1", "notes", "rr"]) { line in
            if restarted.get() == nil, line.contains(#""dataStatus":"fresh""#) {
                restarted.set(true)
                #expect(cluster.stopDaemon() == 0)
                try await cluster.startDaemon()
                try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
                try await cluster.put("notes", "rr", ["v": 2])
            }
        }
        #expect(seen.last?.contains(#""version":2"#) == true, "\(seen)")
        #expect(seen.filter { $0.contains(#""version":1"#) && $0.contains(#""dataStatus":"fresh""#) }.count == 1, "v1 not delivered again: \(seen)")
    }

    @Test func theExampleListensPostsAndReceivesStreamMessagesUnderValgrind() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--bcrypt-cost", "4", "--stream", "songs"], otherUsers: ["bob"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let alice = try await cluster.login()
        let acl = #"{"publishers":["alice","bob"],"subscribers":["alice"]}"#
        #expect(try await cluster.call(.PUT, CloudPath.streamACL("songs", user: "alice"), json: acl, token: alice).status == 200)
        let bob = try await cluster.login(as: "bob")
        let sentByBob = ClusterBox<Bool>()
        // The example listens, posts; on seeing its own post, bob sends one; the second message ends it.
        let seen = try await runExampleUnderValgrind(cluster, ["--stream", "songs", "--post", #"{"title":"from C"}"#, "--until-count", "2"]) { line in
            if sentByBob.get() == nil, line.contains(#""from C""#) {
                sentByBob.set(true)
                let sent = try await cluster.call(
                    .POST,
                    CloudPath.streamMessages("songs", user: "alice"),
                    json: #"{"message":{"title":"from bob"}}"#,
                    token: bob
                )
                #expect(sent.status == 201)
            }
        }
        #expect(seen.count == 2, "\(seen)")
        #expect(seen.first?.hasPrefix(#"stream.message {"token":1,"at":"#) == true, "\(seen)")
        #expect(seen.last?.contains(#""from":"bob","message":{"title":"from bob"}"#) == true, "\(seen)")
    }
}
