// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveSDK
import Testing

@Suite struct OutboxStoreTests {
    /// A fresh outbox in a directory of its own, removed after the test.
    private static func withOutbox(_ body: (OutboxStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(try OutboxStore(path: directory + "/outbox.sqlite", monitor: StorageMonitor()))
    }

    /// A committed write is in the database file itself: a rollback journal and `synchronous = FULL` on the
    /// connection that commits (GRDB sets `NORMAL` on a pool's writer when it turns WAL on; the outbox is no pool).
    @Test func theOutboxCommitsThroughARollbackJournalSyncedInFull() async throws {
        try await Self.withOutbox { outbox in
            let (journalMode, synchronous) = try outbox.durability()
            #expect(journalMode == "delete")
            #expect(synchronous == 2)
        }
    }

    /// The engine closes its outbox on the way out while an observation's start or a write may still reach it.
    /// GRDB's `DatabaseQueue` gave SQLite the closed connection's null handle: the test process (as the daemon
    /// did, stopped in `PolicyTests`) died with SIGSEGV in `sqlite3_get_autocommit`. Every use now fails with
    /// an error instead.
    @Test func everyUseAfterCloseFailsWithAnError() async throws {
        try await Self.withOutbox { outbox in
            let key = EntityKey(collection: "c", id: "o")
            let id = try await outbox.enqueue(key, .delete, ifVersion: nil)
            try outbox.close()
            for use in ["entries", "next", "enqueue", "remove", "adopt"] {
                let error = await #expect(throws: LiveError.self, "\(use)") {
                    switch use {
                    case "entries": _ = try await outbox.entries()
                    case "next": _ = try await outbox.next(after: 0)
                    case "enqueue": _ = try await outbox.enqueue(key, .delete, ifVersion: nil)
                    case "remove": try await outbox.remove(id)
                    default: _ = try outbox.adopt([])
                    }
                }
                #expect(error?.code == .cacheFailure, "\(use)")
                #expect(error?.message.contains("closed") == true, "\(use): \(error?.message ?? "")")
            }
        }
    }

    /// What is queued before the close is there after the file is opened again (the checks above changed no
    /// write's transaction).
    @Test func queuedWritesOutliveAReopen() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/outbox.sqlite"
        let first = try OutboxStore(path: path, monitor: StorageMonitor())
        let a = try await first.enqueue(EntityKey(collection: "c", id: "a"), .delete, ifVersion: 3)
        let b = try await first.enqueue(EntityKey(collection: "c", id: "b"), .delete, ifVersion: nil)
        try await first.remove(a)
        try first.close()
        let second = try OutboxStore(path: path, monitor: StorageMonitor())
        defer { try? second.close() }
        #expect(try await second.entries().map(\.id) == [b])
        #expect(try await second.next(after: 0)?.key == EntityKey(collection: "c", id: "b"))
    }
}
