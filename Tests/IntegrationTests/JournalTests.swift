// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import Testing

#if canImport(Glibc)
    import Glibc
#endif

private let journald = "/lib/systemd/systemd-journald"
private let journalSocket = "/run/systemd/journal/socket"

/// Whether this test may start its own journald: root, the binary present, and no journal already there.
private var canStartJournald: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: journald) && !FileManager.default.fileExists(atPath: journalSocket)
}

/// The daemon's entries in a real journal: `systemd-journald` started by hand (it runs without PID 1),
/// read back with `journalctl -o json`.
@Suite(.serialized) struct JournalTests {
    @Test(.enabled(if: canStartJournald, "needs root, systemd-journald, and no journald already running"))
    func entriesCarryTheStandardAndLivegateFields() async throws {
        let journal = Process()
        journal.executableURL = URL(fileURLWithPath: journald)
        journal.environment = ["SYSTEMD_LOG_TARGET": "console"]
        journal.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        journal.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try journal.run()
        defer {
            journal.terminate()
            journal.waitUntilExit()
            // A stale socket would make later writers fail over to stderr; remove what journald made.
            try? FileManager.default.removeItem(atPath: "/run/systemd/journal")
            try? FileManager.default.removeItem(atPath: "/run/log/journal")
        }
        try await eventually("journald's socket") { FileManager.default.fileExists(atPath: journalSocket) }

        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        cluster.setLogTarget("auto")  // as in production: the journal, found by its socket
        try await cluster.startDaemon()
        let daemonPID = try #require(cluster.daemonPID)
        // The session and the link are up (their events are among those checked below).
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        // Its entry is written once the engine's status reaches the log (a task of its own): waited for in the
        // journal itself, or a stop right after could come first.
        try await eventually("the cloud-connected entry in the journal") {
            try Self.journalEntries(pid: daemonPID).contains { $0["MESSAGE_ID"] == "3cc3d1bc57be4f17af9bc4d70c17a152" }
        }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"notes","id":"j"}}"#)
            _ = try await raw.next()
        }
        cluster.signalDaemon(SIGTERM)
        #expect(cluster.stopDaemon() == 0)

        // The entries, as an administrator reads them.
        let entries = try await withTimeout(.seconds(20), "the daemon's entries in the journal") { () -> [[String: String]] in
            while true {
                let found = try Self.journalEntries(pid: daemonPID)
                if found.contains(where: { $0["MESSAGE_ID"] == "ed25fb83ba91443f955a716b191a05c9" }) { return found }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let connected = try #require(entries.first { $0["MESSAGE"] == "client connected" })
        #expect(connected["SYSLOG_IDENTIFIER"] == "livegated")
        #expect(connected["PRIORITY"] == "6")
        #expect(connected["LIVEGATE_CONN"] == "1")
        #expect(connected["LIVEGATE_CLIENT_PID"] == String(getpid()), "the peer's pid, from SO_PEERCRED")
        #expect(connected["LIVEGATE_CLIENT_UID"] == String(getuid()))
        #expect(connected["CODE_FILE"]?.hasSuffix("ClientConnection.swift") == true)
        #expect(connected["CODE_LINE"].flatMap(Int.init) != nil)
        #expect(connected["CODE_FUNC"]?.isEmpty == false)
        #expect(connected["_TRANSPORT"] == "journal", "a native entry, not a line on stderr")

        let ids = Set(entries.compactMap { $0["MESSAGE_ID"] })
        #expect(ids.contains("904602c2193a493aafb369636eb1ccdf"), "started")
        #expect(ids.contains("0c5c0ddf55424ee6b4a766287c710ab1"), "session established")
        #expect(ids.contains("3cc3d1bc57be4f17af9bc4d70c17a152"), "cloud connected")
        #expect(ids.contains("ed25fb83ba91443f955a716b191a05c9"), "stopping")
        for entry in entries {
            #expect(!entry.values.contains { $0.contains(TestCluster.password) })
        }
    }

    static func journalEntries(pid: Int32) throws -> [[String: String]] {
        let read = try runToCompletion(
            "/bin/journalctl",
            ["--no-pager", "--directory=/run/log/journal", "-o", "json", "_PID=\(pid)"],
            includingErrors: false
        )
        return read.output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object.compactMapValues { $0 as? String }
        }
    }
}
