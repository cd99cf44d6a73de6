// Licensed under the Apache License, Version 2.0.

import Foundation
import Hummingbird
import HummingbirdBcrypt
import LiveCloudAPI
import Synchronization

/// Users (passwords checked against bcrypt hashes) and tokens: short-lived access tokens, and refresh
/// tokens that are exchanged once for a new pair (rotation) and revoked by logout. Tokens are 256-bit
/// random strings; their grants live in the store under the tokens' SHA-256 (`TokenGrant`), so every
/// instance sharing a PostgreSQL database honours them, and a restarted instance still does.
final class AuthService: Sendable {
    private struct Counts {
        var logins = 0
        var refreshes = 0
    }

    /// User name → bcrypt hash.
    private let users: [String: String]
    /// Checks passwords off the request path.
    private let passwords: PasswordChecker
    private let tokenLifetime: Duration
    private let refreshLifetime: Duration
    private let store: any CloudStore
    private let counted = Mutex(Counts())
    /// Failed logins per user name and per address (see ``LoginThrottle``).
    private let throttle: Mutex<LoginThrottle>
    /// The access grants read from the store, by hash. Expiry is checked at each use, as for a grant read from
    /// the store. Bounded: emptied when it holds ``grantCacheLimit``.
    ///
    /// When no other instance shares the store (SQLite), every change to a grant goes through this instance
    /// (logout, the expiry fault), which changes this copy with it: every request is authenticated from it, at
    /// no read of the store (a third of the CPU of a write on 2 cores). On a shared store (PostgreSQL) another
    /// instance may revoke or expire a token, so only writes use it, and each write's transaction confirms the
    /// grant (one statement for its whole batch: ``writer(for:)``); other requests read the store.
    private let grantCache = Mutex(GrantCache())
    /// Whether the copy is the truth (an unshared store), or a hint that writes have confirmed.
    private let grantCacheIsAuthoritative: Bool

    private struct GrantCache {
        var grants: [String: TokenGrant] = [:]
        /// Counts revocations: a grant read from the store before one is not kept (it may be the one revoked).
        var revocations = 0
    }
    static let grantCacheLimit = 10_000

    /// - Parameter users: a password may be given as a bcrypt hash (`$2b$...`); others are hashed here with `bcryptCost`.
    init(
        users: [CloudConfiguration.User],
        tokenLifetime: Duration,
        refreshLifetime: Duration,
        bcryptCost: UInt8,
        loginFailuresAllowed: Int = 5,
        store: any CloudStore
    ) {
        throttle = Mutex(LoginThrottle(freeFailures: loginFailuresAllowed))
        self.users = Dictionary(
            users.map { user in (user.name, user.password.hasPrefix("$2") ? user.password : Bcrypt.hash(user.password, cost: bcryptCost)) },
            uniquingKeysWith: { _, last in last }
        )
        passwords = PasswordChecker(cost: bcryptCost)
        self.tokenLifetime = tokenLifetime
        self.refreshLifetime = refreshLifetime
        self.store = store
        grantCacheIsAuthoritative = !store.isShared
    }

    /// A new token pair for `username` when `password` is right.
    /// - Throws: ``PasswordChecker/Busy`` when too many logins wait for their password check.
    enum LoginOutcome {
        case issued(LoginResponse)
        /// A wrong password, or no such user.
        case refused
        /// Too many failed logins for the name or from the address: no password was checked.
        case throttled(retryAfter: Duration)
    }

    /// A login of `username` from `address` (the peer's, without its port): checked unless the name or the
    /// address failed too often lately (``LoginThrottle``).
    func login(username: String, password: String, address: String?) async throws -> LoginOutcome {
        if let wait = throttle.withLock({ $0.wait(user: username, address: address, now: .now) }) { return .throttled(retryAfter: wait) }
        guard try await passwords.verify(password, hash: users[username]) else {
            throttle.withLock { $0.failed(user: username, address: address, now: .now) }
            return .refused
        }
        throttle.withLock { $0.succeeded(user: username, address: address) }
        defer { counted.withLock { $0.logins += 1 } }
        return .issued(try await issue(to: username))
    }

    /// A new token pair in exchange for a valid refresh token, which is used up.
    func refresh(_ refreshToken: String) async throws -> LoginResponse? {
        guard let grant = try await store.takeRefreshToken(TokenGrant.hash(refreshToken)), !grant.isExpired else { return nil }
        defer { counted.withLock { $0.refreshes += 1 } }
        return try await issue(to: grant.user)
    }

    /// Revokes an access token and the refresh token issued with it.
    func logout(accessToken: String) async throws {
        let hash = TokenGrant.hash(accessToken)
        try await store.revokeAccessToken(hash)
        grantCache.withLock { cache in
            cache.grants[hash] = nil
            cache.revocations += 1
        }
    }

    /// The user a request's bearer token belongs to.
    /// - Throws: ``CloudHTTPError`` 401 `unauthenticated` or `token_expired`.
    func user(for request: Request) async throws -> String {
        try await grant(for: request).user
    }

    /// The bearer token of a request, once checked.
    func bearerToken(of request: Request) async throws -> String {
        _ = try await grant(for: request)
        return String(request.headers[.authorization]!.dropFirst("Bearer ".count))
    }

    /// Who a write is from, and what the store must confirm in the write's transaction.
    struct Writer: Sendable {
        let user: String
        /// On a shared store, the hash of the access token whose grant the write's transaction confirms (still
        /// issued, not expired): the grant came from this instance's copy, and another instance may have
        /// revoked it since. `nil` on an unshared store, whose copy is the truth.
        let grantToConfirm: String?
    }

    /// The user a write's bearer token belongs to, from this instance's copy of the grant when it has one.
    /// On a shared store the write must pass ``Writer/grantToConfirm`` to the store, which refuses the write
    /// (401, as a request with that token would be) if the grant was revoked or expired meanwhile; then call
    /// ``forget(_:)``.
    /// - Throws: ``CloudHTTPError`` 401 `unauthenticated` or `token_expired`.
    func writer(for request: Request) async throws -> Writer {
        let hash = try Self.bearerHash(of: request)
        let grant = try await grant(hash, fromCopy: true)
        return Writer(user: grant.user, grantToConfirm: grantCacheIsAuthoritative ? nil : hash)
    }

    /// Drops this instance's copy of a grant that a store refused (revoked or expired elsewhere).
    func forget(_ hash: String) {
        grantCache.withLock { $0.grants[hash] = nil }
    }

    private func grant(for request: Request) async throws -> TokenGrant {
        try await grant(try Self.bearerHash(of: request), fromCopy: grantCacheIsAuthoritative)
    }

    private static func bearerHash(of request: Request) throws -> String {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw CloudHTTPError.unauthenticated
        }
        return TokenGrant.hash(String(header.dropFirst("Bearer ".count)))
    }

    /// The grant, from this instance's copy when `fromCopy` and it has one, else read from the store (and kept).
    private func grant(_ hash: String, fromCopy: Bool) async throws -> TokenGrant {
        let grant: TokenGrant
        let (cached, revocations) = grantCache.withLock { ($0.grants[hash], $0.revocations) }
        if fromCopy, let cached {
            grant = cached
        } else {
            guard let stored = try await store.tokenGrant(hash, kind: .access) else {
                if cached != nil { forget(hash) }
                throw CloudHTTPError.unauthenticated
            }
            grant = stored
            grantCache.withLock { cache in
                // A revocation since the read may have revoked this very grant: not kept (read again next time).
                guard cache.revocations == revocations else { return }
                if cache.grants.count >= Self.grantCacheLimit { cache.grants.removeAll() }
                cache.grants[hash] = stored
            }
        }
        guard !grant.isExpired else { throw CloudHTTPError.tokenExpired }
        return grant
    }

    /// Fault injection: every access token issued so far expires now (refresh tokens stay valid).
    func expireAll() async throws {
        try await store.expireAccessTokens()
        grantCache.withLock { cache in
            cache.grants.removeAll()
            cache.revocations += 1
        }
    }

    var counts: (logins: Int, refreshes: Int) { counted.withLock { ($0.logins, $0.refreshes) } }

    private func issue(to user: String) async throws -> LoginResponse {
        let access = Self.randomToken()
        let refresh = Self.randomToken()
        let now = TokenGrant.now()
        let accessHash = TokenGrant.hash(access)
        let refreshHash = TokenGrant.hash(refresh)
        try await store.saveTokens([
            (accessHash, TokenGrant(kind: .access, user: user, expiresAt: now + Self.milliseconds(tokenLifetime), pair: refreshHash)),
            (refreshHash, TokenGrant(kind: .refresh, user: user, expiresAt: now + Self.milliseconds(refreshLifetime), pair: accessHash)),
        ])
        return LoginResponse(
            accessToken: access,
            expiresIn: Int(tokenLifetime.components.seconds),
            refreshToken: refresh,
            refreshExpiresIn: Int(refreshLifetime.components.seconds),
            userId: user
        )
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    private static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
    }
}
