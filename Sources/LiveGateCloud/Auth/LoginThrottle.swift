// Licensed under the Apache License, Version 2.0.

/// Failed logins slow down whoever makes them: after `freeFailures` failures in a row for a user name, or from
/// an address, each further attempt from it waits (is refused as 429 with `Retry-After`, no password checked) a
/// delay doubling from ``firstDelay`` up to ``longestDelay``; a success clears the name's record and the
/// address's. A record is forgotten ``forgetAfter`` after its last failure, and at most ``maxRecords`` of each
/// kind are kept (the oldest go first), so guessing at many names or from many addresses costs memory of its own
/// only. Pure: the caller gives the time.
package struct LoginThrottle: Sendable {
    /// Failures that cost nothing; 0: none ever does (no throttling).
    package let freeFailures: Int
    package static let firstDelay: Duration = .seconds(1)
    package static let longestDelay: Duration = .seconds(300)
    package static let forgetAfter: Duration = .seconds(900)
    package static let maxRecords = 100_000

    package struct Record: Sendable, Equatable {
        package var failures: Int
        package var lastFailure: ContinuousClock.Instant
        /// No attempt before this.
        package var blockedUntil: ContinuousClock.Instant?
    }

    package private(set) var users: [String: Record] = [:]
    package private(set) var addresses: [String: Record] = [:]

    package init(freeFailures: Int = 5) {
        self.freeFailures = freeFailures
    }

    /// How long `user` (from `address`) must wait before a login is tried; nil when it may be tried now.
    package func wait(user: String, address: String?, now: ContinuousClock.Instant) -> Duration? {
        let waits = [users[user], address.flatMap { addresses[$0] }].compactMap { record -> Duration? in
            guard let record, now - record.lastFailure < Self.forgetAfter, let until = record.blockedUntil, until > now else { return nil }
            return until - now
        }
        return waits.max()
    }

    /// A login of `user` from `address` failed (a wrong password, or no such user).
    package mutating func failed(user: String, address: String?, now: ContinuousClock.Instant) {
        guard freeFailures > 0 else { return }
        Self.count(&users, user, now, freeFailures: freeFailures)
        if let address { Self.count(&addresses, address, now, freeFailures: freeFailures) }
    }

    /// A login of `user` from `address` succeeded: both records are cleared.
    package mutating func succeeded(user: String, address: String?) {
        users[user] = nil
        if let address { addresses[address] = nil }
    }

    private static func count(_ records: inout [String: Record], _ key: String, _ now: ContinuousClock.Instant, freeFailures: Int) {
        var record = records[key].flatMap { now - $0.lastFailure < forgetAfter ? $0 : nil } ?? Record(failures: 0, lastFailure: now)
        record.failures += 1
        record.lastFailure = now
        if record.failures > freeFailures {
            let doublings = min(record.failures - freeFailures - 1, 20)
            let delay = min(longestDelay, firstDelay * (1 << doublings))
            record.blockedUntil = now + delay
        }
        records[key] = record
        if records.count > maxRecords { prune(&records, now) }
    }

    /// Drops the records forgotten by now, then (still too many) the oldest tenth.
    private static func prune(_ records: inout [String: Record], _ now: ContinuousClock.Instant) {
        records = records.filter { now - $0.value.lastFailure < forgetAfter }
        guard records.count > maxRecords else { return }
        let oldest = records.sorted { $0.value.lastFailure < $1.value.lastFailure }.prefix(records.count - maxRecords * 9 / 10)
        for (key, _) in oldest { records[key] = nil }
    }
}
