// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// The daemon under load: a stalled client among 99 healthy ones, and 1,000 concurrent clients.
@Suite(.serialized) struct LoadTests {
    static func greeting(_ observe: String) -> String {
        #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"load","protocol":1}}"# + "\n" + observe + "\n"
    }

    static func residentKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    @Test func aStalledClientIsCutOffWhileNinetyNineOthersReceiveEveryUpdate() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let config = cluster.directory + "/livegated.conf"
        // Three event loops, whatever the machine's default: the 100 clients are spread over them, so one
        // loop's stalled client must not hold up the others' fan-out either.
        try "max-stall-seconds = 2\nmax-queued-bytes-per-connection = 1048576\nevent-loops = 3\n".write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        try await cluster.startDaemon(extraArguments: ["--config", config])
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        let padding = String(repeating: "p", count: 4096)
        try await cluster.put("hot", "o", ["n": 1, "pad": .string(padding)], token: token)

        let observe = #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"hot","id":"o"}}"#
        var connected: [LineClient] = []
        for _ in 0..<99 { connected.append(try await LineClient.connect(cluster.socketPath, greeting: Self.greeting(observe))) }
        let readers = connected
        let stalled = try StalledClient(cluster.socketPath, greeting: Self.greeting(observe))
        defer { stalled.close() }
        try await eventually("99 readers at version 1") { readers.allSatisfy { $0.versions.last == 1 } }
        let pid = try #require(cluster.daemonPID)
        let before = Self.residentKiB(pid)

        // Updates until the stalled client has been cut off (its writes stall once its buffers fill, and two
        // seconds later the daemon gives up on it), then a few more. Every tenth waits for the healthy readers: a
        // reader is healthy when it keeps up, and these share the machine with the daemon and the cloud (a CI run's
        // other suite beside them held two of them back by ~50 updates once, and the daemon rightly coalesced for
        // them, as it does for any reader behind).
        var version: Int64 = 1
        var after = 0
        while after < 20 {
            version = try await cluster.put("hot", "o", ["n": .integer(version + 1), "pad": .string(padding)], token: token).version
            if version % 10 == 0 {
                let written = version
                try await eventually("99 readers at version \(written)") { readers.allSatisfy { ($0.versions.last ?? 0) >= written } }
            }
            if after > 0 || cluster.daemonLog.contains("client cut off") { after += 1 }
            #expect(version < 5000, "the stalled client was never cut off")
            if version >= 5000 { break }
        }
        let last = version
        try await eventually("99 readers at version \(last)") { readers.allSatisfy { $0.versions.last == last } }
        let incomplete = readers.filter { $0.versions != Array(1...last) }
        #expect(
            incomplete.isEmpty,
            "\(incomplete.count) healthy readers missed or repeated updates, e.g. \(incomplete.first.map { Set(1...last).subtracting($0.versions).sorted().prefix(10) } ?? [])"
        )
        // The stalled client's socket is closed by the daemon (after what fit in its buffers).
        let rest = try await stalled.drainUntilClosed(timeout: .seconds(20))
        #expect(rest != nil, "the daemon kept the stalled connection open")
        #expect(cluster.daemonLog.contains("22c57993a0d64912a952047b7919781d") || cluster.daemonLog.contains("client cut off"))
        // Memory stayed bounded: what was queued for the stalled client was dropped, not accumulated.
        let grown = Self.residentKiB(pid) - before
        #expect(grown < 64 * 1024, "the daemon grew by \(grown) KiB")
        for reader in readers { await reader.close() }
    }

    @Test(arguments: [1, 3])
    func aThousandConcurrentClientsObservingObjectsAndCollections(eventLoops: Int) async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let config = cluster.directory + "/livegated.conf"
        try "event-loops = \(eventLoops)\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await cluster.startDaemon(extraArguments: ["--config", config])
        #expect(cluster.daemonLog.contains("eventLoops=\(eventLoops)"), "the daemon logs the loops it serves with")
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for n in 0..<10 {
            try await cluster.put("mix", "o\(n)", ["group": .string(n % 2 == 0 ? "even" : "odd"), "n": .integer(n)], token: token)
        }

        var connected: [LineClient] = []
        for index in 0..<1000 {
            let observe =
                index % 2 == 0
                ? #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"mix","id":"o\#(index % 10)"}}"#
                : #"{"jsonrpc":"2.0","id":2,"method":"collection.observe","params":{"collection":"mix","query":{"where":{"group":"\#(index % 4 == 1 ? "even" : "odd")"},"sort":{"field":"n"}}}}"#
            connected.append(try await LineClient.connect(cluster.socketPath, greeting: Self.greeting(observe)))
        }
        let clients = connected
        let fresh = #""dataStatus":"fresh""#
        try await eventually("1,000 clients with fresh data", timeout: .seconds(60)) {
            clients.allSatisfy { client in client.lines.contains { $0.contains(fresh) } }
        }
        // One write reaches every observer of it: 100 object tokens of o4 and 250 collection tokens of "even".
        try await cluster.put("mix", "o4", ["group": "even", "n": 4, "changed": true], token: token)
        try await eventually("the change at every observer", timeout: .seconds(60)) {
            clients.enumerated().allSatisfy { index, client in
                let observesIt = (index % 2 == 0 && index % 10 == 4) || index % 4 == 1
                return !observesIt || client.lines.contains { $0.contains(#""changed":true"#) }
            }
        }
        let stats = try await cluster.stats()
        #expect(stats.fetches["mix/o4"] == 1, "one fetch for 100 observers of o4")
        #expect(stats.subscriptions["collection:mix"] == 1)
        // And afterwards the daemon serves a newcomer as before.
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "newcomer") { client in
            let changes = Queue(try await client.observeObject(collection: "mix", id: "o1").changes)
            let state = try await change(changes, "o1 fresh") { $0.dataStatus == .fresh }
            #expect(state.snapshot?.version == 1)
        }
        for client in clients { await client.close() }
    }
}
