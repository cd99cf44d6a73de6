// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// The outbox's sender: which queued write goes next, and what each outcome of sending it asks for. Pure: the
/// engine reads the outbox, sends, stores and tells the observers (LiveClient+Outbox.swift).
///
/// Writes go in the order they were queued, one at a time. A write ends confirmed or rejected, and is then
/// never sent again in this run; one the cloud could not be reached for stays queued and is sent again after
/// a pause that grows with the failures in a row.
package struct OutboxSender: Sendable {
    /// How sending a write ended.
    package enum Outcome: Equatable, Sendable {
        /// The cloud applied it (or had applied it under its write id) and answered with the stored entity.
        case confirmed(Entity)
        /// The cloud was not reached, or not with a valid session: the write stays queued.
        case unreachable(LiveError)
        /// The cloud refused it (a version conflict, a permission, an invalid write).
        case rejected(LiveError)

        /// How a failed send ended: the errors that say the cloud was not reached (or the cache could not
        /// take part) leave the write queued; any other is the cloud's refusal.
        package static func failed(_ error: LiveError) -> Outcome {
            [.cloudUnavailable, .unauthenticated, .cacheFailure].contains(error.code) ? .unreachable(error) : .rejected(error)
        }
    }

    /// What the engine does, in order.
    package enum Action: Equatable, Sendable {
        /// Store the confirmed entity in the cache.
        case store(Entity)
        /// Remove the write from the outbox (then report ``removed(_:)`` or ``removalFailed(_:)``).
        case remove(Int64)
        /// Tell the object's observers and windows, and the write's waiter, that the write was confirmed.
        case confirm(Int64, Entity)
        /// Tell them that it was rejected.
        case reject(Int64, LiveError)
        /// Wait before sending the write again (the `failures`-th failure in a row).
        case pause(failures: Int)
    }

    /// The last write that ended: the next to send is the first queued after it.
    package private(set) var last: Int64 = 0
    /// Failures to reach the cloud in a row.
    package private(set) var failures = 0
    /// Writes that ended but whose removal from the outbox failed (a full disk): never sent again, not shown
    /// as pending, removed at a later turn (a restart before that sends them again under their write id, and
    /// the cloud applies each once).
    package private(set) var doneButQueued: Set<Int64> = []

    package init() {}

    /// Whether write `id` is still pending (queued and not ended).
    package func isPending(_ id: Int64) -> Bool { !doneButQueued.contains(id) }

    /// Sending write `id` ended with `outcome`. A confirmed write's entity goes into the cache before the
    /// write leaves the outbox: a crash in between sends the write again at the next start, under its write
    /// id, and the cloud answers with the first outcome; the reverse order could lose the confirmed entity.
    package mutating func sent(_ id: Int64, _ outcome: Outcome) -> [Action] {
        switch outcome {
        case .confirmed(let entity):
            failures = 0
            last = max(last, id)
            return [.store(entity), .remove(id), .confirm(id, entity)]
        case .rejected(let error):
            failures = 0
            last = max(last, id)
            return [.remove(id), .reject(id, error)]
        case .unreachable:
            failures += 1
            return [.pause(failures: failures)]
        }
    }

    /// Write `id` left the outbox.
    package mutating func removed(_ id: Int64) { doneButQueued.remove(id) }

    /// Write `id` ended but could not leave the outbox: it is kept from being sent again, and removed later.
    package mutating func removalFailed(_ id: Int64) { doneButQueued.insert(id) }
}
