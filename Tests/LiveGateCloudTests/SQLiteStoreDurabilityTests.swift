// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveGateCloud
import LiveSQLite
import Testing

/// An answered write is on disk: the connection that commits the cloud's writes syncs the WAL at every
/// commit (`synchronous = FULL`). GRDB's pool sets its writer to `NORMAL` when it turns WAL on, after the
/// configuration's own set-up, which syncs only at checkpoints.
@Suite struct SQLiteStoreDurabilityTests {
    @Test func theWriterSyncsEveryCommitOnANewFileAndOnReopeningIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lg-durability-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for _ in 0..<2 {
            let store = try SQLiteStore(path: directory + "/cloud.sqlite") { _, _ in }
            defer { try? store.close() }
            let (mode, synchronous, autocheckpoint) = try await store.pool.writeWithoutTransaction { db in
                (
                    try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"),
                    try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint")
                )
            }
            #expect(mode == "wal")
            #expect(synchronous == 2, "PRAGMA synchronous is \(synchronous.map(String.init) ?? "nil"), not 2 (FULL)")
            // The writer's own checkpoint only as the backstop: the checkpointer beside it does the work.
            #expect(autocheckpoint == WALCheckpointer.backstopPages)
        }
    }
}
