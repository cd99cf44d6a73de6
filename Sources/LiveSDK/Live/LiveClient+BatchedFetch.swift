// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// The batched reads' bookkeeping: who waits for which read, in the order asked, and how many requests fly.
package struct FetchBatches {
    package var waiters: [Int: LiveClient.FetchWaiter] = [:]
    var queue: [Int] = []
    var nextWaiter = 0
    var requestsRunning = 0
}

/// Fetches of objects, batched: a fetch asked for while the engine's fetch requests are all in flight waits
/// for the next one, which carries every fetch asked for meanwhile (up to the cloud's batch limit) in one
/// request (`POST /v1/objects/read`). One fetch alone goes out at once, as a `GET`: batching adds no latency,
/// and a burst of new observations (a list of thousands of items opened at once) costs a request per batch
/// rather than one per object. What a batch fetched is stored in the cache in one transaction.
///
/// An object whose realtime topic has no baseline yet (the link to the cloud is down or still connecting, so
/// the subscription is not in place) is read with `POST` even alone: its answer says which event the read is as
/// of, and the subscription made once the link is up resumes from there. The cloud then replays what changed
/// since the read, and the object needs no second fetch and its observers no resync notice.
extension LiveClient {
    /// How many fetch requests may be in flight at once.
    static let fetchRequestsInFlight = 2

    /// A fetch's outcome: what the cloud said, which event its read is as of (when it was read with the batched
    /// read), and why the cache could not store it, if it could not.
    typealias FetchOutcome = (result: Result<Entity?, LiveError>, readAt: Int64?, storeFailure: LiveError?)

    package struct FetchWaiter {
        let key: EntityKey
        let checkpoint: (topic: Topic, seq: Int64)?
        let continuation: CheckedContinuation<FetchOutcome, Never>
    }

    /// The object as the cloud has it (see ``CloudClient/fetch(_:token:)``), fetched with others asked for
    /// at about the same time, and stored in the cache with `checkpoint` (the object topic's sequence number
    /// as of before the fetch; without one, as of the read); also which event the read is as of (without a
    /// checkpoint, always known from a cloud that says it) and why it could not be stored, if it could not.
    /// Cancelling the waiting task ends its wait (the batch goes on for the others).
    func batchedFetch(
        _ key: EntityKey,
        checkpoint: (topic: Topic, seq: Int64)?
    ) async throws(LiveError) -> (entity: Entity?, readAt: Int64?, storeFailure: LiveError?) {
        objectStarts.fetchBatches.nextWaiter += 1
        let id = objectStarts.fetchBatches.nextWaiter
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<FetchOutcome, Never>) in
                guard !Task.isCancelled else {
                    continuation.resume(returning: (.failure(Self.fetchCancelled(key)), nil, nil))
                    return
                }
                objectStarts.fetchBatches.waiters[id] = FetchWaiter(key: key, checkpoint: checkpoint, continuation: continuation)
                objectStarts.fetchBatches.queue.append(id)
                startFetchRequests()
            }
        } onCancel: {
            Task { await self.cancelFetch(id) }
        }
        return (try outcome.result.get(), outcome.readAt, outcome.storeFailure)
    }

    private static func fetchCancelled(_ key: EntityKey) -> LiveError {
        LiveError(code: .cloudUnavailable, message: "the fetch of \(key) was cancelled: the engine is stopping")
    }

    private func cancelFetch(_ id: Int) {
        guard let waiter = objectStarts.fetchBatches.waiters.removeValueShrinking(forKey: id) else { return }
        waiter.continuation.resume(returning: (.failure(Self.fetchCancelled(waiter.key)), nil, nil))
    }

    private func startFetchRequests() {
        while objectStarts.fetchBatches.requestsRunning < Self.fetchRequestsInFlight, !objectStarts.fetchBatches.queue.isEmpty {
            objectStarts.fetchBatches.requestsRunning += 1
            Task { await self.sendFetchRequests() }
        }
    }

    /// Sends what is queued, one request after another, until nothing is.
    private func sendFetchRequests() async {
        defer { objectStarts.fetchBatches.requestsRunning -= 1 }
        while !objectStarts.fetchBatches.queue.isEmpty {
            let ids = objectStarts.fetchBatches.queue.prefix(ReadObjectsRequest.maximumKeys)
            objectStarts.fetchBatches.queue.removeFirst(ids.count)
            if objectStarts.fetchBatches.queue.isEmpty { objectStarts.fetchBatches.queue = [] }  // the storage a burst grew it to, given back
            let batch = ids.compactMap { id in objectStarts.fetchBatches.waiters[id].map { (id, $0.key, $0.checkpoint) } }
            guard !batch.isEmpty else { continue }
            var keys: [EntityKey] = []
            var seen: Set<EntityKey> = []
            for (_, key, _) in batch where seen.insert(key).inserted { keys.append(key) }
            let results: [EntityKey: Result<Entity?, LiveError>]
            var readAt: Int64?
            let blind = Set(batch.compactMap { _, key, checkpoint in checkpoint == nil ? key : nil })
            do {
                if keys.count == 1, blind.isEmpty {
                    let key = keys[0]
                    let entity = try await withSession { token throws(LiveError) in try await cloud.fetch(key, token: token) }
                    results = [key: .success(entity)]
                } else {
                    (results, readAt) = try await withSession { token throws(LiveError) in try await cloud.read(keys, token: token) }
                }
            } catch {
                results = Dictionary(uniqueKeysWithValues: keys.map { ($0, .failure(error)) })
            }
            if let readAt, !blind.isEmpty {
                // Before the cache and the observers hear of it: the subscription that the link makes when it
                // comes up resumes from the read.
                await realtime.read(blind.filter { if case .success = results[$0] { true } else { false } }.map(Topic.object), asOf: readAt)
            }
            // What was fetched goes to the cache in one transaction, before its observers hear of it.
            var storeFailure: LiveError?
            do {
                try await cache.store(
                    batch.compactMap { _, key, checkpoint in
                        guard case .success(let entity) = results[key] else { return nil }
                        // A read without a baseline is as of its own seq: the next run resumes the topic from it.
                        let asOfRead = readAt.map { (topic: Topic.object(key), seq: $0) }
                        return CacheStore.Fetched(entity: entity, checkpoint: checkpoint ?? asOfRead)
                    }
                )
            } catch {
                storeFailure = error
            }
            for (id, key, _) in batch {
                guard let waiter = objectStarts.fetchBatches.waiters.removeValueShrinking(forKey: id) else { continue }  // cancelled meanwhile
                let result = results[key] ?? .failure(Self.fetchCancelled(key))
                if case .success = result {
                    waiter.continuation.resume(returning: (result, readAt, storeFailure))
                } else {
                    waiter.continuation.resume(returning: (result, nil, nil))
                }
            }
        }
    }
}
