// Licensed under the Apache License, Version 2.0.

import Foundation
import Hummingbird
import HummingbirdBcrypt
import LiveCloudAPI
import Synchronization

/// Users (passwords checked against bcrypt hashes) and tokens: short-lived access tokens, and refresh
/// tokens that are exchanged once for a new pair (rotation) and revoked by logout. Tokens are 256-bit
/// random strings kept in memory with their expiry.
final class AuthService: Sendable {
    private struct AccessGrant {
        let user: String
        var expiry: ContinuousClock.Instant
        /// The refresh token issued with it, revoked with it at logout.
        let refreshToken: String
    }

    private struct RefreshGrant {
        let user: String
        let expiry: ContinuousClock.Instant
    }

    private struct State {
        var access: [String: AccessGrant] = [:]
        var refresh: [String: RefreshGrant] = [:]
        var logins = 0
        var refreshes = 0
    }

    /// User name → bcrypt hash.
    private let users: [String: String]
    private let tokenLifetime: Duration
    private let refreshLifetime: Duration
    private let state = Mutex(State())

    /// - Parameter users: a password may be given as a bcrypt hash (`$2b$...`); others are hashed here with `bcryptCost`.
    init(users: [CloudConfiguration.User], tokenLifetime: Duration, refreshLifetime: Duration, bcryptCost: UInt8) {
        self.users = Dictionary(
            users.map { user in (user.name, user.password.hasPrefix("$2") ? user.password : Bcrypt.hash(user.password, cost: bcryptCost)) },
            uniquingKeysWith: { _, last in last }
        )
        self.tokenLifetime = tokenLifetime
        self.refreshLifetime = refreshLifetime
    }

    /// A new token pair for `username` when `password` is right.
    func login(username: String, password: String) -> LoginResponse? {
        guard let hash = users[username], Bcrypt.verify(password, hash: hash) else { return nil }
        return issue(to: username) { $0.logins += 1 }
    }

    /// A new token pair in exchange for a valid refresh token, which is used up.
    func refresh(_ refreshToken: String) -> LoginResponse? {
        let user = state.withLock { state -> String? in
            guard let grant = state.refresh.removeValue(forKey: refreshToken), grant.expiry > .now else { return nil }
            return grant.user
        }
        guard let user else { return nil }
        return issue(to: user) { $0.refreshes += 1 }
    }

    /// Revokes an access token and the refresh token issued with it.
    func logout(accessToken: String) {
        state.withLock { state in
            guard let grant = state.access.removeValue(forKey: accessToken) else { return }
            state.refresh[grant.refreshToken] = nil
        }
    }

    /// The user a request's bearer token belongs to.
    /// - Throws: ``CloudHTTPError`` 401 `unauthenticated` or `token_expired`.
    func user(for request: Request) throws -> String {
        try grant(for: request).user
    }

    /// The bearer token of a request, once checked.
    func bearerToken(of request: Request) throws -> String {
        _ = try grant(for: request)
        return String(request.headers[.authorization]!.dropFirst("Bearer ".count))
    }

    private func grant(for request: Request) throws -> AccessGrant {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw CloudHTTPError.unauthenticated
        }
        let token = String(header.dropFirst("Bearer ".count))
        guard let grant = state.withLock({ $0.access[token] }) else { throw CloudHTTPError.unauthenticated }
        guard grant.expiry > .now else { throw CloudHTTPError.tokenExpired }
        return grant
    }

    /// Fault injection: every access token issued so far expires now (refresh tokens stay valid).
    func expireAll() {
        state.withLock { state in
            let now = ContinuousClock.now
            for token in state.access.keys { state.access[token]?.expiry = now }
        }
    }

    var counts: (logins: Int, refreshes: Int) { state.withLock { ($0.logins, $0.refreshes) } }

    private func issue(to user: String, count: (inout State) -> Void) -> LoginResponse {
        let access = Self.randomToken()
        let refresh = Self.randomToken()
        let now = ContinuousClock.now
        state.withLock { state in
            state.access = state.access.filter { $0.value.expiry > now }
            state.refresh = state.refresh.filter { $0.value.expiry > now }
            state.access[access] = AccessGrant(user: user, expiry: now + tokenLifetime, refreshToken: refresh)
            state.refresh[refresh] = RefreshGrant(user: user, expiry: now + refreshLifetime)
            count(&state)
        }
        return LoginResponse(
            accessToken: access,
            expiresIn: Int(tokenLifetime.components.seconds),
            refreshToken: refresh,
            refreshExpiresIn: Int(refreshLifetime.components.seconds),
            userId: user
        )
    }

    private static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
    }
}
