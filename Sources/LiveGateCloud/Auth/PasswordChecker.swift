// Licensed under the Apache License, Version 2.0.

import HummingbirdBcrypt
import NIOCore
import NIOPosix
import Synchronization

/// Checks passwords against bcrypt hashes off the request path: on threads of its own (all cores but one, at
/// least one), never on the tasks that serve requests, so a storm of logins leaves every other request its core.
/// At most ``maxWaiting`` checks wait their turn; beyond that a login is refused as busy (429, `Retry-After`).
///
/// An unknown user's password is checked against a hash made at start with the same cost, so a login takes as
/// long whether or not the user exists.
final class PasswordChecker: Sendable {
    /// More logins than this waiting for a thread: the next is refused as busy.
    static let maxWaiting = 256

    /// Refused: ``maxWaiting`` checks wait already.
    struct Busy: Error {}

    private let pool: NIOThreadPool
    private let waiting = Mutex(0)
    /// A hash of a password nobody has, at the users' cost.
    private let unknownUserHash: String

    init(cost: UInt8) {
        pool = NIOThreadPool(numberOfThreads: max(1, System.coreCount - 1))
        pool.start()
        unknownUserHash = Bcrypt.hash(String(UInt64.random(in: .min ... .max), radix: 36), cost: cost)
    }

    /// Whether `password` matches `hash`; with no hash (an unknown user), `false` after as long a check.
    /// - Throws: ``Busy`` when too many checks wait.
    func verify(_ password: String, hash: String?) async throws -> Bool {
        let admitted = waiting.withLock { count in
            guard count < Self.maxWaiting else { return false }
            count += 1
            return true
        }
        guard admitted else { throw Busy() }
        defer { waiting.withLock { $0 -= 1 } }
        let target = hash ?? unknownUserHash
        let matches = try await pool.runIfActive { Bcrypt.verify(password, hash: target) }
        return matches && hash != nil
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }
}
