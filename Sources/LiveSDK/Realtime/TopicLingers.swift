// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// Released topics that linger, still subscribed, before they are dropped (see
/// ``RealtimeConnection/release(_:)``), in the order they were released.
///
/// Every linger lasts as long, so they end in the order they began: one timer, set for the oldest, serves them
/// all, however many topics a closing connection releases at once. A topic released again while it
/// lingers lingers anew from then: its earlier entry is passed over when it comes due. Pure: the connection
/// keeps the clock and the timer.
package struct TopicLingers<Key: Hashable & Sendable>: Sendable {
    let duration: Duration

    private struct Entry: Sendable {
        let key: Key
        let generation: Int
        let deadline: ContinuousClock.Instant
    }

    /// In release order, so in deadline order; those before `head` are done.
    private var entries: [Entry] = []
    private var head = 0
    /// Each lingering key's latest linger (the only one that counts).
    private var current: [Key: Int] = [:]
    private var generation = 0

    package init(duration: Duration) { self.duration = duration }

    /// How many keys linger.
    package var count: Int { current.count }

    /// When the oldest entry comes due (it may be one passed over), or `nil` when none is queued.
    package var nextDeadline: ContinuousClock.Instant? { head < entries.count ? entries[head].deadline : nil }

    /// `key` was released at `now` (no earlier than any release before it): it lingers until `now + duration`.
    package mutating func linger(_ key: Key, at now: ContinuousClock.Instant) {
        generation += 1
        current[key] = generation
        entries.append(Entry(key: key, generation: generation, deadline: now + duration))
    }

    /// The keys whose latest linger ended by `now`, in the order they were released; they linger no more.
    package mutating func expired(at now: ContinuousClock.Instant) -> [Key] {
        var due: [Key] = []
        while head < entries.count, entries[head].deadline <= now {
            let entry = entries[head]
            head += 1
            if current[entry.key] == entry.generation {
                current.removeValueShrinking(forKey: entry.key)
                due.append(entry.key)
            }
        }
        if head == entries.count {
            entries = []  // the storage a burst of releases grew it to, given back
            head = 0
        } else if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return due
    }
}

/// The topics that stay subscribed for a moment after their last holder left, and whether the one task that ends
/// their lingers runs.
struct Lingering {
    var topics: TopicLingers<Topic>
    var running = false
}
