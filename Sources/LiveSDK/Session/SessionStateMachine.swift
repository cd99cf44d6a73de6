// Licensed under the Apache License, Version 2.0.

/// The cloud session's states, as observers see them.
public enum SessionState: String, Sendable, Codable {
    /// No credentials have been tried yet, or the session was logged out.
    case notLoggedIn
    /// A login is in flight.
    case establishing
    /// Logged in with an access token that has not expired.
    case established
    /// The access token expired (or the cloud said so); a new login is needed before the next request.
    case tokenExpired
    /// The cloud refused the credentials; nothing will be retried until the configuration changes.
    case terminated
}

/// The session's state machine: pure, no I/O, time given as an input.
///
/// Events are facts (`loginStarted`, `loginSucceeded`, ...). The shell (``Session``) performs the I/O the
/// returned actions ask for.
public struct SessionStateMachine: Sendable {
    public enum Action: Equatable, Sendable {
        /// Use this token.
        case useToken(String)
        /// Log in now (no other login is in flight).
        case startLogin
        /// Exchange this refresh token for a new token pair now (no other login is in flight).
        case startRefresh(String)
        /// A login is in flight; wait for its outcome.
        case waitForLogin
        /// Fail: the credentials were refused.
        case fail(reason: String)
    }

    public private(set) var state: SessionState = .notLoggedIn
    private var token: String?
    private var expiry: ContinuousClock.Instant?
    private var refreshToken: String?
    private var refreshExpiry: ContinuousClock.Instant?
    private var refusal: String?

    public init() {}

    /// A request needs a token at `now`.
    public mutating func tokenNeeded(now: ContinuousClock.Instant) -> Action {
        switch state {
        case .established:
            if let token, let expiry, now < expiry { return .useToken(token) }
            state = .tokenExpired
            token = nil
            return tokenNeeded(now: now)
        case .establishing:
            return .waitForLogin
        case .notLoggedIn, .tokenExpired:
            state = .establishing
            if let refreshToken, let refreshExpiry, now < refreshExpiry { return .startRefresh(refreshToken) }
            refreshToken = nil
            return .startLogin
        case .terminated:
            return .fail(reason: refusal ?? "the cloud refused the credentials")
        }
    }

    /// A login (or a refresh) succeeded with a token valid for `lifetime` from `now`, and a refresh token
    /// valid for `refreshLifetime`. A margin is kept so that a token is renewed before the cloud would
    /// reject it.
    public mutating func loginSucceeded(
        token: String,
        lifetime: Duration,
        refreshToken: String? = nil,
        refreshLifetime: Duration = .zero,
        now: ContinuousClock.Instant
    ) {
        let margin = min(lifetime / 10, .seconds(30))
        self.token = token
        self.expiry = now + lifetime - margin
        self.refreshToken = refreshToken
        self.refreshExpiry = refreshToken == nil ? nil : now + refreshLifetime - min(refreshLifetime / 10, .seconds(30))
        self.refusal = nil
        state = .established
    }

    /// The cloud refused the refresh token (unknown, used, expired, revoked): the next request logs in.
    public mutating func refreshRefused() {
        refreshToken = nil
        refreshExpiry = nil
        state = .tokenExpired
    }

    /// A login or refresh failed for a reason that may pass (network, 5xx): the next request tries again
    /// (with the refresh token, if there is one).
    public mutating func loginFailedTransiently() {
        token = nil
        state = refreshToken == nil ? .notLoggedIn : .tokenExpired
    }

    /// The cloud refused the credentials: stop trying.
    public mutating func credentialsRefused(reason: String) {
        token = nil
        refreshToken = nil
        refusal = reason
        state = .terminated
    }

    /// The cloud rejected `token` as expired or unknown; only acted on if it is still the current token.
    public mutating func tokenRejected(_ rejected: String) {
        guard state == .established, token == rejected else { return }
        token = nil
        state = .tokenExpired
    }

    /// The configuration changed (new credentials): forget any refusal and start over.
    public mutating func reset() {
        token = nil
        refreshToken = nil
        refusal = nil
        state = .notLoggedIn
    }
}
