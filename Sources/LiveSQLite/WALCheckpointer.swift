// Licensed under the Apache License, Version 2.0.

import GRDB
import Logging

/// Copies what the WAL holds into the database file from a connection of its own, so that the database's writer
/// never does it inside a commit. SQLite's automatic checkpoint runs in the commit that fills the WAL past its
/// threshold (1,000 pages): copying those pages and syncing the file held that commit, and every write waiting
/// for the next (the cloud's writes; the engine's loop, where the cache stores realtime events). A passive
/// checkpoint here runs beside the writer (SQLite lets one connection checkpoint while another appends to the
/// WAL), woken by every commit of the writer (``commitObserver``), at most once per ``spacing``: small and
/// often, since the checkpoint's writes and sync still share the disk with the commits' (the cloud's
/// `livegate-bench --paced-write-rate 4000`, 64 writers, p99 of a write: 9.1-18.4 ms with the writer's
/// checkpoint, 5.2-31.3 ms and 8 runs of 11 under 10 ms with this one; once a second, 29-34 ms; Benchmarks.md).
///
/// The writer's own checkpoint stays as a backstop at ``backstopPages`` (``writerPragmas``: should ``run()``
/// not run, or fall behind), so the WAL stays bounded either way. Each checkpoint syncs the database file before
/// SQLite may reuse the WAL: what was committed durably stays on disk.
public final class WALCheckpointer: Sendable {
    /// The WAL size (in pages) at which the writer checkpoints inside its commit after all.
    public static let backstopPages = 8_000
    /// What the writer's connections set: its automatic checkpoint only as the backstop.
    public static let writerPragmas = "PRAGMA wal_autocheckpoint = \(backstopPages)"
    /// The least time between two checkpoints: under load each copies what that time's commits wrote.
    public static let spacing: Duration = .milliseconds(25)

    private let queue: DatabaseQueue
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    private let logger: Logger
    /// Told of every commit of the connection it is added to (the writer: whatever it writes); each wakes this
    /// checkpointer.
    public let commitObserver: CommitObserver

    /// A checkpointer of the database at `path`; add ``commitObserver`` to the writer's pool.
    public init(path: String, label: String, logger: Logger) throws {
        var configuration = Configuration()
        configuration.label = label
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        (wakeups, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        commitObserver = CommitObserver(wake: wake)
        self.logger = logger
    }

    /// Wakes the checkpointer after each commit; observes no changes (GRDB then records none).
    public final class CommitObserver: TransactionObserver, Sendable {
        private let wake: AsyncStream<Void>.Continuation
        init(wake: AsyncStream<Void>.Continuation) { self.wake = wake }
        public func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
        public func databaseDidChange(with event: DatabaseEvent) {}
        public func databaseDidCommit(_ db: Database) { wake.yield() }
        public func databaseDidRollback(_ db: Database) {}
    }

    /// Checkpoints after commits until the task is cancelled or ``close()`` is called.
    public func run() async {
        for await _ in wakeups {
            do {
                // A wakeup buffered before ``close()`` still arrives after it. GRDB hands SQLite a closed
                // connection's null handle (a segmentation fault in `sqlite3_wal_checkpoint_v2`), so the
                // checkpoint looks, on the queue that closes the connection, whether it is still open.
                let open = try await queue.writeWithoutTransaction { db -> Bool in
                    guard db.sqliteConnection != nil else { return false }
                    _ = try db.checkpoint(.passive)
                    return true
                }
                if !open { return }
            } catch {
                // Busy or failed: the next commit wakes this again; the writer's backstop bounds the WAL meanwhile.
                logger.debug("a WAL checkpoint did not run", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: Self.spacing)
        }
    }

    /// Ends ``run()`` and closes the checkpointer's connection (before the writer's: SQLite checkpoints as the
    /// last connection closes).
    public func close() throws {
        wake.finish()
        try queue.close()
    }
}
