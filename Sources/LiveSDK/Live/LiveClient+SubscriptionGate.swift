// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// How many new observations await their topic's subscription at once after their read. Each waits in a task
/// whose frames down to the realtime connection's send hold task-allocator memory until the cloud answers, so
/// a burst would hold as many as it has observations (Benchmarks.md, memory per observed object). The rest
/// wait, in order, before entering that chain; two batches' worth (``RealtimeClientBatch/maximumRequests``)
/// keeps one batch in flight and the next full. The reads are not held back: an observation is fresh before its subscription is made. (Observations
/// resuming from the cache's checkpoints are not gated: a burst of them waits in a task per
/// ``RealtimeClientBatch/maximumRequests``, see ``LiveClient/activate(_:)``.)
extension LiveClient {
    package static let subscriptionsInFlight = 2 * RealtimeClientBatch.maximumRequests

    package struct SubscriptionGate {
        var running = 0
        /// The most that ever ran at once.
        package var mostRunning = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Index of the next waiter to resume (``waiters`` is consumed from the front).
        var next = 0
    }

    /// Runs `subscribe` once fewer than ``subscriptionsInFlight`` others run.
    func gatedSubscription<T>(_ subscribe: () async -> T) async -> T {
        if objectStarts.subscriptionGate.running < Self.subscriptionsInFlight {
            objectStarts.subscriptionGate.running += 1
        } else {
            // Resumed by a subscription that ends, which hands its place over (the count stays). Checked again in
            // the body: the call may suspend before running it, and a place may have come free meanwhile.
            await withCheckedContinuation { waiter in
                if objectStarts.subscriptionGate.running < Self.subscriptionsInFlight {
                    objectStarts.subscriptionGate.running += 1
                    waiter.resume()
                } else {
                    objectStarts.subscriptionGate.waiters.append(waiter)
                }
            }
        }
        objectStarts.subscriptionGate.mostRunning = max(objectStarts.subscriptionGate.mostRunning, objectStarts.subscriptionGate.running)
        let result = await subscribe()
        if objectStarts.subscriptionGate.next < objectStarts.subscriptionGate.waiters.count {
            let waiter = objectStarts.subscriptionGate.waiters[objectStarts.subscriptionGate.next]
            objectStarts.subscriptionGate.next += 1
            if objectStarts.subscriptionGate.next == objectStarts.subscriptionGate.waiters.count {
                objectStarts.subscriptionGate.waiters = []
                objectStarts.subscriptionGate.next = 0
            }
            waiter.resume()
        } else {
            objectStarts.subscriptionGate.running -= 1
        }
        return result
    }
}
