// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// What new observations start from, read in batches: the cached copy, the topic's checkpoint and the writes
/// pending in the outbox of every object a burst of new observations asks for (a list of thousands opened at
/// once) come from one cache transaction and one outbox read, instead of three handed to the databases'
/// queues and back for each object. A start asked for while a batch is read waits for the next, which
/// carries every start asked for meanwhile; one alone is read at once.
extension LiveClient {
    /// What an observation starts from (see ``LiveClient/observe(_:options:handler:)``).
    struct ObservationStart: Sendable {
        var cached: Entity?
        /// The cache holds every event of the object's topic up to this sequence number: the subscription
        /// resumes from it.
        var checkpoint: Int64?
        var pending: [OutboxEntry]
    }

    struct StartWaiter {
        let key: EntityKey
        let continuation: CheckedContinuation<Result<ObservationStart, LiveError>, Never>
    }

    /// How many keys one batch reads at most.
    static let startBatchLimit = 1000

    func batchedStart(_ key: EntityKey) async throws(LiveError) -> ObservationStart {
        try await withCheckedContinuation { (continuation: CheckedContinuation<Result<ObservationStart, LiveError>, Never>) in
            startWaiters.append(StartWaiter(key: key, continuation: continuation))
            if !startsReading {
                startsReading = true
                Task { await self.readStarts() }
            }
        }.get()
    }

    /// Reads what waits, a batch after another, until nothing does.
    private func readStarts() async {
        defer { startsReading = false }
        while !startWaiters.isEmpty {
            let batch = Array(startWaiters.prefix(Self.startBatchLimit))
            startWaiters.removeFirst(batch.count)
            if startWaiters.isEmpty { startWaiters = [] }  // the storage a burst grew it to, given back
            let keys = Array(Set(batch.map(\.key)))
            let outcome: Result<[EntityKey: ObservationStart], LiveError>
            do {
                let read = try await cache.starts(of: keys, topics: keys.map { Topic.object($0).description })
                let pending = Dictionary(grouping: try await outbox.entries(), by: \.key)
                var starts: [EntityKey: ObservationStart] = [:]
                for (index, key) in keys.enumerated() {
                    starts[key] = ObservationStart(
                        cached: read.entities[key],
                        checkpoint: read.checkpoints[index],
                        pending: (pending[key] ?? []).filter { !doneButQueued.contains($0.id) }
                    )
                }
                outcome = .success(starts)
            } catch {
                outcome = .failure(error)
            }
            for waiter in batch {
                waiter.continuation.resume(returning: outcome.map { $0[waiter.key] ?? ObservationStart(pending: []) })
            }
        }
    }
}
