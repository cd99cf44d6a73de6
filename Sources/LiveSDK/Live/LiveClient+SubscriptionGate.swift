// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// How many new observations await their topic's subscription at once after their read. Each waits in a task
/// whose frames down to the realtime connection's send take ~11 KB of the task allocator's slabs until the
/// cloud answers; the subscriptions go out a batch at a time
/// (``RealtimeClientBatch/maximumRequests``), so a burst of 10,000 new observations held them all at once
/// (a burst of 100,000: 2.2 GB at its peak, and what stayed, interleaved with them, fragmented the heap). The
/// rest wait, in order, before entering that chain; two batches' worth keeps one batch in flight and the next
/// full. The reads are not held back: an observation is fresh before its subscription is made. (Observations
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
        if subscriptionGate.running < Self.subscriptionsInFlight {
            subscriptionGate.running += 1
        } else {
            // Resumed by a subscription that ends, which hands its place over (the count stays). Checked again in
            // the body: the call may suspend before running it, and a place may have come free meanwhile.
            await withCheckedContinuation { waiter in
                if subscriptionGate.running < Self.subscriptionsInFlight {
                    subscriptionGate.running += 1
                    waiter.resume()
                } else {
                    subscriptionGate.waiters.append(waiter)
                }
            }
        }
        subscriptionGate.mostRunning = max(subscriptionGate.mostRunning, subscriptionGate.running)
        let result = await subscribe()
        if subscriptionGate.next < subscriptionGate.waiters.count {
            let waiter = subscriptionGate.waiters[subscriptionGate.next]
            subscriptionGate.next += 1
            if subscriptionGate.next == subscriptionGate.waiters.count {
                subscriptionGate.waiters = []
                subscriptionGate.next = 0
            }
            waiter.resume()
        } else {
            subscriptionGate.running -= 1
        }
        return result
    }
}
