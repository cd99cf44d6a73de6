// Licensed under the Apache License, Version 2.0.

import Foundation
import Hummingbird
import LiveCloudAPI
import Synchronization

/// Users and access tokens. Tokens are 256-bit random strings kept in memory with their expiry.
final class AuthService: Sendable {
    private struct Grant {
        let user: String
        let expiry: ContinuousClock.Instant
    }

    private let users: [String: String]
    private let tokenLifetime: Duration
    private let grants = Mutex<[String: Grant]>([:])

    init(users: [CloudConfiguration.User], tokenLifetime: Duration) {
        self.users = Dictionary(users.map { ($0.name, $0.password) }, uniquingKeysWith: { _, last in last })
        self.tokenLifetime = tokenLifetime
    }

    /// A new token for `username` when `password` is right.
    func login(username: String, password: String) -> LoginResponse? {
        guard let expected = users[username], Self.constantTimeEqual(expected, password) else { return nil }
        var generator = SystemRandomNumberGenerator()
        let token = (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
        let expiry = ContinuousClock.now + tokenLifetime
        grants.withLock { grants in
            let now = ContinuousClock.now
            grants = grants.filter { $0.value.expiry > now }
            grants[token] = Grant(user: username, expiry: expiry)
        }
        return LoginResponse(accessToken: token, expiresIn: Int(tokenLifetime.components.seconds), userId: username)
    }

    /// The user a request's bearer token belongs to.
    /// - Throws: ``CloudHTTPError`` 401 `unauthenticated` or `token_expired`.
    func user(for request: Request) throws -> String {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw CloudHTTPError.unauthenticated
        }
        let token = String(header.dropFirst("Bearer ".count))
        guard let grant = grants.withLock({ $0[token] }) else { throw CloudHTTPError.unauthenticated }
        guard grant.expiry > .now else { throw CloudHTTPError.tokenExpired }
        return grant.user
    }

    /// Fault injection: every token issued so far expires now.
    func expireAll() {
        grants.withLock { grants in
            let now = ContinuousClock.now
            grants = grants.mapValues { Grant(user: $0.user, expiry: now) }
        }
    }

    private static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }
}
