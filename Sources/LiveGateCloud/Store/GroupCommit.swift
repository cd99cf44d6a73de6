// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Group commit: the writes submitted while a transaction commits wait for the next one, which takes every
/// waiting write (up to ``maximumBatch``), in the order they were submitted, so many writes share one commit
/// (one sync to disk, one lock, one round of notifications). A write alone (nothing committing) starts a
/// transaction at once: no added latency when the store is idle.
///
/// The store's `commit` applies a batch in one transaction and answers each write; it must keep each write's
/// own semantics (see ``SQLiteStore`` and ``PostgresStore``): a write sees every write applied before it, its
/// events take sequence numbers in that order, and it is answered only once the transaction committed. A
/// transaction that fails to commit fails every write in it: none was answered, none is visible.
final class GroupCommit<Request: Sendable, Outcome: Sendable>: Sendable {
    typealias Commit = @Sendable ([Request]) async -> [Result<Outcome, any Error>]

    private struct Waiting: Sendable {
        let request: Request
        let continuation: CheckedContinuation<Result<Outcome, any Error>, Never>
    }

    /// The most writes one transaction takes (a bound on how long a commit holds the store's write lock).
    static var maximumBatch: Int { 256 }

    private let commit: Commit
    private let state = Mutex<(waiting: [Waiting], committing: Bool, transactions: Int, writes: Int)>(([], false, 0, 0))

    /// Where the task that runs the transactions prefers to run (`nil`: the cooperative pool).
    private let executor: (any TaskExecutor)?

    init(executor: (any TaskExecutor)? = nil, commit: @escaping Commit) {
        self.executor = executor
        self.commit = commit
    }

    /// Transactions run and writes they took so far (writes per transaction, for the stats and the bench).
    var committed: (transactions: Int, writes: Int) { state.withLock { ($0.transactions, $0.writes) } }

    /// Applies `request` in the next transaction; returns its outcome once that transaction committed.
    func submit(_ request: Request) async throws -> Outcome {
        try await withCheckedContinuation { (continuation: CheckedContinuation<Result<Outcome, any Error>, Never>) in
            let starts = state.withLock { state in
                state.waiting.append(Waiting(request: request, continuation: continuation))
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            if starts { Task(executorPreference: executor) { await self.commitWaiting() } }
        }.get()
    }

    /// Commits what waits, one transaction after another, until nothing does.
    private func commitWaiting() async {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                let taken = Array(state.waiting.prefix(Self.maximumBatch))
                state.waiting.removeFirst(taken.count)
                if taken.isEmpty { state.committing = false }
                return taken
            }
            guard !batch.isEmpty else { return }
            var results = await commit(batch.map(\.request))
            if results.count != batch.count {
                // A store's bug, not a write's fault: no write of the batch is answered as done.
                results = Array(repeating: .failure(GroupCommitError.answersMiscounted(results.count, batch.count)), count: batch.count)
            }
            state.withLock { state in
                state.transactions += 1
                state.writes += batch.count
            }
            for (waiting, result) in zip(batch, results) { waiting.continuation.resume(returning: result) }
        }
    }
}

enum GroupCommitError: Error, CustomStringConvertible {
    case answersMiscounted(Int, Int)

    var description: String {
        switch self {
        case .answersMiscounted(let answers, let writes): "a group commit answered \(answers) of \(writes) writes"
        }
    }
}
