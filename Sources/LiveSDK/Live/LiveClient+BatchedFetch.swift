// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// Fetches of objects, batched: a fetch asked for while the engine's fetch requests are all in flight waits
/// for the next one, which carries every fetch asked for meanwhile (up to the cloud's batch limit) in one
/// request (`POST /v1/objects/read`). One fetch alone goes out at once, as a `GET`: batching adds no latency,
/// and a burst of new observations (a list of thousands of items opened at once) costs a request per batch
/// rather than one per object.
extension LiveClient {
    /// How many fetch requests may be in flight at once.
    static let fetchRequestsInFlight = 2

    struct FetchWaiter {
        let key: EntityKey
        let continuation: CheckedContinuation<Result<Entity?, LiveError>, Never>
    }

    /// The object as the cloud has it (see ``CloudClient/fetch(_:token:)``), fetched with others asked for
    /// at about the same time. Cancelling the waiting task ends its wait (the batch goes on for the others).
    func batchedFetch(_ key: EntityKey) async throws(LiveError) -> Entity? {
        nextFetchWaiter += 1
        let id = nextFetchWaiter
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Entity?, LiveError>, Never>) in
                guard !Task.isCancelled else {
                    continuation.resume(returning: .failure(Self.fetchCancelled(key)))
                    return
                }
                fetchWaiters[id] = FetchWaiter(key: key, continuation: continuation)
                fetchQueue.append(id)
                startFetchRequests()
            }
        } onCancel: {
            Task { await self.cancelFetch(id) }
        }
        return try result.get()
    }

    private static func fetchCancelled(_ key: EntityKey) -> LiveError {
        LiveError(code: .cloudUnavailable, message: "the fetch of \(key) was cancelled: the engine is stopping")
    }

    private func cancelFetch(_ id: Int) {
        guard let waiter = fetchWaiters.removeValue(forKey: id) else { return }
        waiter.continuation.resume(returning: .failure(Self.fetchCancelled(waiter.key)))
    }

    private func startFetchRequests() {
        while fetchRequestsRunning < Self.fetchRequestsInFlight, !fetchQueue.isEmpty {
            fetchRequestsRunning += 1
            Task { await self.sendFetchRequests() }
        }
    }

    /// Sends what is queued, one request after another, until nothing is.
    private func sendFetchRequests() async {
        defer { fetchRequestsRunning -= 1 }
        while !fetchQueue.isEmpty {
            let ids = fetchQueue.prefix(ReadObjectsRequest.maximumKeys)
            fetchQueue.removeFirst(ids.count)
            let batch = ids.compactMap { id in fetchWaiters[id].map { (id, $0.key) } }
            guard !batch.isEmpty else { continue }
            var keys: [EntityKey] = []
            var seen: Set<EntityKey> = []
            for (_, key) in batch where seen.insert(key).inserted { keys.append(key) }
            let results: [EntityKey: Result<Entity?, LiveError>]
            do {
                if keys.count == 1 {
                    let key = keys[0]
                    let entity = try await withSession { token throws(LiveError) in try await cloud.fetch(key, token: token) }
                    results = [key: .success(entity)]
                } else {
                    results = try await withSession { token throws(LiveError) in try await cloud.read(keys, token: token) }
                }
            } catch {
                results = Dictionary(uniqueKeysWithValues: keys.map { ($0, .failure(error)) })
            }
            for (id, key) in batch {
                guard let waiter = fetchWaiters.removeValue(forKey: id) else { continue }  // cancelled meanwhile
                waiter.continuation.resume(returning: results[key] ?? .failure(Self.fetchCancelled(key)))
            }
        }
    }
}
