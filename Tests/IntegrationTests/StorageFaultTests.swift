// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Testing

/// Faults of the state directory a host really has, on the real daemon: a damaged cache (moved aside, the
/// daemon serves from the cloud), a damaged cache under queued writes (the writes live in the outbox, and
/// reach the cloud), a damaged outbox (what is readable is salvaged and sent, the damaged file kept), a full disk
/// (writes get -32008, reads go on, the journal says it once).
@Suite(.serialized) struct StorageFaultTests {
    /// The daemon's `livegated` command line as `startDaemon` runs it, for a start that is expected to fail.
    private func daemonCommand(_ cluster: TestCluster) -> [String] {
        cluster.daemonArguments + ["--password-file", cluster.directory + "/password"]
    }

    private func overwrite(_ path: String, withRandomBytes count: Int) throws {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test func aDamagedCacheIsMovedAsideAndObserversAreServedFromTheCloud() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "kept", ["a": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "damage") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "kept").changes)
            _ = try await elements(queue, until: "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
        }
        #expect(cluster.stopDaemon() == 0)
        let cache = cluster.directory + "/state/cache.sqlite"
        try overwrite(cache, withRandomBytes: 64 * 1024)
        try? FileManager.default.removeItem(atPath: cache + "-wal")
        try await cluster.put("notes", "kept", ["a": 2])

        // Without the recovery, the daemon exits 1 ("file is not a database") and never gets READY.
        try await cluster.startDaemon()
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "damage") { daemon in
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "kept").changes)
            _ = try await elements(queue, until: "fresh v2 from the cloud") { $0.dataStatus == .fresh && $0.snapshot?.version == 2 }
        }
        let state = try FileManager.default.contentsOfDirectory(atPath: cluster.directory + "/state")
        let aside = try #require(state.first { $0.hasPrefix("cache.sqlite.damaged-") }, "\(state)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: cluster.directory + "/state/" + aside)).count == 64 * 1024,
            "the damaged file is kept as it was"
        )
        let log = cluster.daemonLog
        #expect(log.contains("d2ae51b03d10453f887ddcba0a942873") && log.contains(aside), "journal entry naming the file moved aside")
    }

    @Test(arguments: ["random bytes over the cache, no WAL", "the cache truncated to nothing, a garbage WAL"])
    func aQueuedWriteSurvivesADestroyedCache(_ damage: String) async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.fault(#"{"failRequests":100000}"#)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "survivor") { daemon in
            try await daemon.queueUpdate(collection: "notes", id: "w", data: ["n": 1])
            try await daemon.queueUpdate(collection: "notes", id: "w", data: ["m": 2], merge: true)
            #expect(try await daemon.stats().pendingWrites == 2)
        }
        #expect(cluster.stopDaemon() == 0)
        let cache = cluster.directory + "/state/cache.sqlite"
        if damage.hasPrefix("random") {
            try overwrite(cache, withRandomBytes: 128 * 1024)
            try? FileManager.default.removeItem(atPath: cache + "-wal")
        } else {
            #expect(truncate(cache, 0) == 0)
            try overwrite(cache + "-wal", withRandomBytes: 64 * 1024)
        }
        try await cluster.fault(#"{"failRequests":0}"#)
        try await cluster.startDaemon()
        // Before the outbox had a file of its own the two writes were in the cache, and were gone.
        try await eventually("both writes in the cloud") { (try? await cluster.get("notes", "w"))?.version == 2 }
        #expect(try await cluster.get("notes", "w").data == ["n": 1, "m": 2])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "survivor") { daemon in
            try await eventually("the outbox empty") { try await daemon.stats().pendingWrites == 0 }
        }
    }

    /// A damaged outbox does not stop the service: the writes still readable are salvaged into a new outbox and
    /// sent, once and in order; the damaged file is kept aside; the journal and `livegatectl stats` say so.
    @Test(arguments: [
        "emptied", "random bytes", "text written over it", "a garbled journal beside it", "its journal removed", "truncated to half",
    ])
    func aDamagedOutboxIsSalvagedAndTheDaemonServes(_ damage: String) async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        // The cloud refuses every write, so they wait in the outbox: one object, replaced 200 times (n = 1...200).
        try await cluster.fault(#"{"failRequests":100000}"#)
        let writes = 200
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { daemon in
            for n in 1...writes {
                try await daemon.queueUpdate(
                    collection: "notes",
                    id: "queued",
                    data: ["n": .integer(n), "pad": .string(String(repeating: "x", count: 64))]
                )
            }
        }
        if damage == "its journal removed" {
            // Killed, not stopped: a transaction the daemon had under way leaves its journal hot, and the journal
            // removed leaves the file as that transaction had half written it (or whole, when none was).
            cluster.signalDaemon(SIGKILL)
            _ = cluster.stopDaemon()
            unlink(cluster.directory + "/state/outbox.sqlite-journal")
        } else {
            #expect(cluster.stopDaemon() == 0)
        }
        let outbox = cluster.directory + "/state/outbox.sqlite"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: outbox)[.size] as? Int)
        switch damage {
        case "emptied": #expect(truncate(outbox, 0) == 0)
        case "random bytes": try overwrite(outbox, withRandomBytes: 8 * 1024)
        case "text written over it": try Data(String(repeating: "not a database\n", count: 500).utf8).write(to: URL(fileURLWithPath: outbox))
        case "a garbled journal beside it": try overwrite(outbox + "-journal", withRandomBytes: 4 * 1024)
        default: #expect(truncate(outbox, off_t(size / 2)) == 0)
        }
        let damaged = try Data(contentsOf: URL(fileURLWithPath: outbox))

        // Without the salvage, the daemon exits 65 and nothing is served.
        let begun = ContinuousClock.now
        try await cluster.startDaemon()
        let stats = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { try await $0.stats() }
        #expect(ContinuousClock.now - begun < .seconds(5), "the daemon answers within 5 s")

        // What was salvaged reaches the cloud, each write once and in order: the object's version is the number of
        // writes applied, and its data the last one's.
        let salvaged: Int
        if damage == "a garbled journal beside it" || (damage == "its journal removed" && stats.quarantinedOutbox == nil) {
            // SQLite sets an invalid journal aside: the outbox is whole, nothing to salvage. So is an outbox whose
            // journal was not hot when it was removed.
            #expect(stats.quarantinedOutbox == nil)
            salvaged = writes
        } else if damage == "its journal removed" {
            // Half a transaction written: what is readable is salvaged, in order.
            let quarantined = try #require(stats.quarantinedOutbox)
            salvaged = quarantined.salvaged
            #expect(salvaged <= writes && stats.pendingWrites == salvaged)
        } else {
            let quarantined = try #require(stats.quarantinedOutbox, "stats: \(stats)")
            #expect(quarantined.file.hasPrefix(outbox + ".damaged-"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: quarantined.file)) == damaged, "the damaged file is kept as it was")
            salvaged = quarantined.salvaged
            #expect(stats.pendingWrites == salvaged)
            if damage == "truncated to half" {
                #expect(salvaged > 0 && salvaged < writes, "salvaged \(salvaged) of \(writes)")
            } else {
                #expect(salvaged == 0 && quarantined.unreadable == nil)
            }
            let log = cluster.daemonLog
            #expect(log.contains("93e28c64771c49abbdeea610202497fa") && log.contains(quarantined.file), "the journal entry: \(log.suffix(2000))")
            let printed = try runToCompletion(TestCluster.binDirectory + "/livegatectl", ["stats", "--socket", cluster.socketPath])
            #expect(printed.output.contains("damaged outbox kept at \(quarantined.file) (\(salvaged) writes salvaged"), "\(printed.output)")
        }
        try await cluster.fault(#"{"failRequests":0}"#)
        try await eventually("the outbox sent", timeout: .seconds(60)) {
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outbox") { try await $0.stats() }.pendingWrites == 0
        }
        if salvaged == 0 {
            let read = try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "notes", id: "queued")), token: try await cluster.login())
            #expect(read.status == 404, "nothing salvaged, nothing sent: \(read.body)")
        } else {
            let entity = try await cluster.get("notes", "queued")
            #expect(entity.version == Int64(salvaged), "each salvaged write applied once")
            if damage == "a garbled journal beside it" || salvaged == writes { #expect(entity.data["n"] == .integer(writes)) }
        }
    }

    /// The state directory on a tmpfs of 1 MiB, mounted in a mount namespace of the daemon's own (root only).
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func aFullDiskFailsWritesWithAStorageErrorAndReadsGoOn() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let state = cluster.directory + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try await cluster.startDaemon(launcher: [
            "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount -t tmpfs -o size=1m livegate-test-state '\(state)' && exec \"$@\"", "sh",
        ])
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "readable", ["a": 1])
        try await cluster.fault(#"{"failRequests":100000}"#)
        let big = JSONValue.string(String(repeating: "x", count: 64 * 1024))
        let acknowledged = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "full") { daemon in
            var refusal: LiveGateError?
            var acknowledged = 0
            for n in 0..<64 where refusal == nil {
                do {
                    try await daemon.queueUpdate(collection: "notes", id: "big\(n)", data: ["blob": big])
                    acknowledged += 1
                } catch let error as LiveGateError {
                    refusal = error
                }
            }
            let error = try #require(refusal, "1 MiB is full after at most 16 writes of 64 KiB")
            #expect(error.code == .storageFailure && error.data?["reason"] == "full", "\(error)")
            #expect(error.message.contains("full") && error.message.contains("outbox.sqlite"), "\(error)")

            // Reads go on from the cloud (once it answers), whatever the cache can store.
            try await cluster.fault(#"{"failRequests":0}"#)
            let queue = Queue(try await daemon.observeObject(collection: "notes", id: "readable").changes)
            _ = try await elements(queue, until: "fresh from the cloud") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
            // The queued writes reach the cloud, and leave the outbox although the disk may not record it yet.
            try await eventually("the queued writes sent") { try await daemon.stats().pendingWrites == 0 }
            return acknowledged
        }
        for n in 0..<acknowledged {
            #expect(try await cluster.get("notes", "big\(n)").data["blob"] == big, "acknowledged write \(n) in the cloud")
        }
        let log = cluster.daemonLog
        #expect(log.contains("5458134890c044c096e660b252b83c7e"), "a journal entry for the failing file")
        #expect(!log.contains("failed internally"))
    }
}
