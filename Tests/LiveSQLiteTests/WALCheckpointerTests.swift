// Licensed under the Apache License, Version 2.0.

import Foundation
import GRDB
import LiveSQLite
import Logging
import Testing

@Suite struct WALCheckpointerTests {
    /// A fresh directory for one test's database, removed after it.
    private static func withDatabasePath(_ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livesqlite-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(directory + "/db.sqlite")
    }

    /// A writer in WAL mode, then a checkpointer that its commits wake (in this order, as the stores open them:
    /// a connection opened before the database is in WAL mode would not checkpoint it).
    private static func open(_ path: String) throws -> (DatabaseQueue, WALCheckpointer) {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: WALCheckpointer.writerPragmas)
        }
        let writer = try DatabaseQueue(path: path, configuration: configuration)
        try writer.write { db in try db.execute(sql: "CREATE TABLE t (v BLOB)") }
        let checkpointer = try WALCheckpointer(path: path, label: "test.checkpointer", logger: Logger(label: "test"))
        writer.add(transactionObserver: checkpointer.commitObserver, extent: .databaseLifetime)
        return (writer, checkpointer)
    }

    /// A commit's wakeup still buffered when the checkpointer is closed reaches `run()` after the close: the daemon
    /// stopped with a segmentation fault (SQLite given the closed connection's null handle) whenever the cache
    /// committed just before it stopped. Now `run()` ends without touching the closed connection.
    @Test func aWakeupBufferedBeforeCloseEndsTheRun() async throws {
        try await Self.withDatabasePath { path in
            let (writer, checkpointer) = try Self.open(path)
            try await writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (zeroblob(10000))") }
            try checkpointer.close()
            await checkpointer.run()
            try writer.close()
        }
    }

    /// While it runs, the checkpointer copies the writer's commits into the database file: the file grows without
    /// the writer checkpointing (its own threshold, ``WALCheckpointer/backstopPages``, is far off).
    @Test func commitsReachTheDatabaseFileWhileItRuns() async throws {
        try await Self.withDatabasePath { path in
            let (writer, checkpointer) = try Self.open(path)
            let run = Task { await checkpointer.run() }
            @Sendable func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0 }
            let before = size()
            for _ in 1...50 { try await writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (zeroblob(10000))") } }
            let deadline = ContinuousClock.now + .seconds(20)
            while size() < before + 400_000, ContinuousClock.now < deadline {
                try await writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (zeroblob(1))") }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(size() >= before + 400_000, "the database file: \(before) bytes before, \(size()) after")
            try checkpointer.close()
            await run.value
            try writer.close()
        }
    }
}
