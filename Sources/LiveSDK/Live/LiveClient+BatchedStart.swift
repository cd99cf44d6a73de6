// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// How object observations start in bursts: their starts read in batches, their fetches batched, their
/// activation deferred while a burst lasts, and their subscriptions let through a few at a time.
package struct ObjectStarts: Sendable {
    /// Batched observation starts (this file).
    var startBatch = StartBatch()
    /// Batched object reads (LiveClient+BatchedFetch.swift).
    package var fetchBatches = FetchBatches()
    /// Observations told a cached copy, waiting for their activation (``LiveClient/activateWhenTheBurstPauses(_:)``).
    var activationDeferral: ActivationDeferral<SharedObjectObservation>
    /// New observations' subscriptions (LiveClient+SubscriptionGate.swift).
    package var subscriptionGate = LiveClient.SubscriptionGate()
}

/// The batched starts' bookkeeping: the observations waiting for their cached copy, and whether a read runs.
struct StartBatch {
    var waiters: [LiveClient.StartWaiter] = []
    var reading = false
    /// Observations still reading their start whose observer waits for fresh data: activated as soon as they are
    /// told their cached copy, not held with a burst's (see ``LiveClient/activateAtOnce(_:)``).
    var activatingAtOnce: Set<EntityKey> = []
}

/// What new observations start from, read in batches: the cached copy, the topic's checkpoint and the writes
/// pending in the outbox of every object a burst of new observations asks for (a list of thousands opened at
/// once) come from one cache transaction and one outbox read, instead of three handed to the databases'
/// queues and back for each object. A start asked for while a batch is read waits for the next, which
/// carries every start asked for meanwhile; one alone is read at once. The daemon hands a burst of new
/// observations over in one call (``LiveClient/observe(_:)``), which waits as one.
extension LiveClient {
    /// What an observation starts from (see ``LiveClient/observe(_:options:handler:)``).
    struct ObservationStart: Sendable {
        var cached: Entity?
        /// The cache holds every event of the object's topic up to this sequence number: the subscription
        /// resumes from it.
        var checkpoint: Int64?
        var pending: [OutboxEntry]
    }

    /// Observations waiting for what they start from: one waiter for the keys of one call (a burst handed
    /// over at once is one waiter).
    struct StartWaiter {
        let keys: [EntityKey]
        let continuation: CheckedContinuation<Result<[ObservationStart], LiveError>, Never>
    }

    /// How many keys one batch reads at most (a waiter with more is read alone).
    public static let startBatchLimit = 1000

    /// What each of `keys` starts from, in their order.
    func batchedStarts(_ keys: [EntityKey]) async throws(LiveError) -> [ObservationStart] {
        try await withCheckedContinuation { (continuation: CheckedContinuation<Result<[ObservationStart], LiveError>, Never>) in
            objectStarts.startBatch.waiters.append(StartWaiter(keys: keys, continuation: continuation))
            if !objectStarts.startBatch.reading {
                objectStarts.startBatch.reading = true
                Task { await self.readStarts() }
            }
        }.get()
    }

    /// Activates `started`, observations that were told a cached copy, when ``ActivationDeferral`` says: a
    /// burst of them once it pauses, one on its own once no start is being read. Those with nothing cached are
    /// not held back: their read is their first answer. An observation that ended meanwhile is not activated
    /// (one started anew for its key has its own activation).
    func activateWhenTheBurstPauses(_ started: [SharedObjectObservation]) {
        perform(objectStarts.activationDeferral.told(started, at: .now, startsReading: objectStarts.startBatch.reading))
    }

    private typealias Deferral = ActivationDeferral<SharedObjectObservation>

    /// Reads these objects from the cloud now (or resumes their topics) where their observations are held with a
    /// burst's cached copies (``activateWhenTheBurstPauses(_:)``), or as soon as told theirs where they still read
    /// their start: for an observer that waits for fresh data (the daemon's `freshOnly` token joining an
    /// observation that a burst started). An observation activated already, or with no observation, is left as
    /// it is.
    public func activateAtOnce(_ keys: [EntityKey]) {
        for key in keys {
            guard let observation = objects.observations[key] else { continue }
            if objectStarts.activationDeferral.take(observation) {
                commandSink.yield(.activate(key))
            } else if !observation.hasStarted {
                objectStarts.startBatch.activatingAtOnce.insert(key)
            }
        }
    }

    private func perform(_ step: Deferral.Step) {
        switch step {
        case .activate(let due):
            for observation in due where objects.observations[observation.key] === observation {
                commandSink.yield(.activate(observation.key))
            }
        case .awaitPause:
            Task {
                var step = Deferral.Step.awaitPause
                while case .awaitPause = step {
                    try? await Task.sleep(for: objectStarts.activationDeferral.pause)
                    step = objectStarts.activationDeferral.pauseElapsed(at: .now, startsReading: objectStarts.startBatch.reading)
                }
                perform(step)
            }
        case .wait:
            break
        }
    }

    /// Reads what waits, a batch after another, until nothing does.
    private func readStarts() async {
        defer {
            objectStarts.startBatch.reading = false
            perform(objectStarts.activationDeferral.startsRead(at: .now))
        }
        while !objectStarts.startBatch.waiters.isEmpty {
            var taken = 1
            var keyCount = objectStarts.startBatch.waiters[0].keys.count
            while taken < objectStarts.startBatch.waiters.count, keyCount + objectStarts.startBatch.waiters[taken].keys.count <= Self.startBatchLimit
            {
                keyCount += objectStarts.startBatch.waiters[taken].keys.count
                taken += 1
            }
            let batch = Array(objectStarts.startBatch.waiters.prefix(taken))
            objectStarts.startBatch.waiters.removeFirst(taken)
            if objectStarts.startBatch.waiters.isEmpty { objectStarts.startBatch.waiters = [] }  // the storage a burst grew it to, given back
            // The waiters' keys one after another: a key two of them ask for is read once (``CacheStore/starts(of:)``
            // places a repeated key's start from its first).
            let keys = batch.count == 1 ? batch[0].keys : batch.flatMap(\.keys)
            let outcome: Result<[ObservationStart], LiveError>
            do {
                let read = try await cache.starts(of: keys)
                let pending = Dictionary(grouping: try await outbox.entries(), by: \.key)
                var starts: [ObservationStart] = []
                starts.reserveCapacity(keys.count)
                for (index, key) in keys.enumerated() {
                    starts.append(
                        ObservationStart(
                            cached: read.entities[index],
                            checkpoint: read.checkpoints[index],
                            pending: pending[key].map { $0.filter { writeState.sender.isPending($0.id) } } ?? []
                        )
                    )
                }
                outcome = .success(starts)
            } catch {
                outcome = .failure(error)
            }
            var offset = 0
            for waiter in batch {
                let range = offset..<offset + waiter.keys.count
                offset = range.upperBound
                waiter.continuation.resume(returning: outcome.map { starts in batch.count == 1 ? starts : Array(starts[range]) })
            }
        }
    }
}
