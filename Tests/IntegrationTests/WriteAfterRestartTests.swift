// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveJSON
import Testing

/// An app that observes an object and writes to it at once, right after the daemon was killed and started again
/// (issue 74's first glitch): its first state is the cached object (with the write applied, pending), never the
/// object told as `notExist`, and never `notLoading` (Protocol/ipc's order of an observation's states).
@Suite(.serialized) struct WriteAfterRestartTests {
    @Test func aWriteRightAfterAnObserveIsShownOverTheCachedObject() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        for n in 1...3 { try await cluster.put("notes", "n1", ["text": "v", "n": .integer(n)]) }
        // The daemon caches the object (v3).
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "cacher") { daemon in
            let changes = Queue(try await daemon.observeObject(collection: "notes", id: "n1").changes)
            _ = try await change(changes, "fresh v3") { $0.dataStatus == .fresh && $0.snapshot?.version == 3 }
        }
        cluster.signalDaemon(SIGKILL)
        cluster.stopDaemon()
        try await cluster.startDaemon()

        // An observe and a merge written together, as an app that does not wait.
        let client = try await LineClient.connect(
            cluster.socketPath,
            greeting: #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"app","protocol":1}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"notes","id":"n1"}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":3,"method":"object.update","params":{"collection":"notes","id":"n1","data":{"done":true},"merge":true}}"#
                + "\n"
        )
        defer { Task { await client.close() } }
        try await eventually("the write's answer") { client.lines.contains { $0.hasPrefix(#"{"id":3,"#) } }
        let states = client.lines.filter { $0.contains(#""method":"object.changed""#) }
        let first = try #require(states.first)
        #expect(!first.contains(#""dataStatus":"notExist""#), "the object looked deleted: \(states)")
        #expect(!first.contains(#""loadingStatus":"notLoading""#), "\(states)")
        #expect(states.allSatisfy { !$0.contains(#""dataStatus":"notExist""#) }, "\(states)")
        let answer = try #require(client.lines.first { $0.hasPrefix(#"{"id":3,"#) })
        #expect(answer.contains(#""version":4"#), "\(answer)")
    }
}
