// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import Logging

/// Credentials the engine logs in with. `description` never shows the password.
public struct Credentials: Sendable, CustomStringConvertible {
    public var username: String
    public var password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    public var description: String { "Credentials(username: \(username), password: <redacted>)" }
}

/// The one authenticated cloud session: hands out a valid access token, logging in when needed (one login
/// at a time however many requests wait), and publishes its state to observers.
public actor Session {
    private var machine = SessionStateMachine()
    private let credentials: Credentials
    /// The cloud's API this session signs in through.
    nonisolated let cloud: CloudClient
    private let logger: Logger
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var stateObservers: [Int: @Sendable (SessionState) -> Void] = [:]
    private var nextObserverID = 0

    /// The user this session signs in as (the cloud's user id).
    public nonisolated let username: String

    init(credentials: Credentials, cloud: CloudClient, logger: Logger) {
        self.credentials = credentials
        self.username = credentials.username
        self.cloud = cloud
        self.logger = logger
    }

    /// The current state.
    public var state: SessionState { machine.state }

    /// Calls `observer` with every state change (not the current state). Returns an id for ``removeObserver(_:)``.
    public func addObserver(_ observer: @escaping @Sendable (SessionState) -> Void) -> Int {
        nextObserverID += 1
        stateObservers[nextObserverID] = observer
        return nextObserverID
    }

    public func removeObserver(_ id: Int) { stateObservers[id] = nil }

    /// A valid access token, logging in first if there is none.
    /// - Throws: ``LiveError`` with code `cloudUnavailable` or `unauthenticated`.
    func accessToken() async throws(LiveError) -> String {
        while true {
            let before = machine.state
            let action = machine.tokenNeeded(now: .now)
            publishIfChanged(from: before)
            switch action {
            case .useToken(let token):
                return token
            case .waitForLogin:
                // Checked again in the body: the call may suspend before running it (an executor switch), and the
                // login may end meanwhile, after resuming the waiters it had.
                await withCheckedContinuation { waiter in
                    if machine.state == .establishing { waiters.append(waiter) } else { waiter.resume() }
                }
            case .fail(let reason):
                throw LiveError(code: .unauthenticated, message: reason)
            case .startLogin:
                try await login()
            case .startRefresh(let refreshToken):
                try await refresh(refreshToken)
            }
        }
    }

    /// The cloud answered 401 for `token`: forget it so the next request logs in again.
    func tokenRejected(_ token: String) {
        let before = machine.state
        machine.tokenRejected(token)
        publishIfChanged(from: before)
    }

    private func login() async throws(LiveError) {
        defer {
            let waiting = waiters
            waiters.removeAll()
            for waiter in waiting { waiter.resume() }
        }
        do {
            let response = try await cloud.login(LoginRequest(username: credentials.username, password: credentials.password))
            let before = machine.state
            adopt(response)
            logger.debug("logged in to the cloud", metadata: ["user": "\(response.userId)"])
            publishIfChanged(from: before)
        } catch let error where error.code == .unauthenticated {
            let before = machine.state
            machine.credentialsRefused(reason: "the cloud refused the credentials of user \(credentials.username)")
            logger.error("cloud refused the credentials", metadata: ["user": "\(credentials.username)"])
            publishIfChanged(from: before)
            throw error
        } catch {
            let before = machine.state
            machine.loginFailedTransiently()
            logger.warning("cloud login failed", metadata: ["error": "\(error.message)"])
            publishIfChanged(from: before)
            throw error
        }
    }

    /// Renews the token pair; a refused refresh token makes the next request log in instead.
    private func refresh(_ refreshToken: String) async throws(LiveError) {
        defer {
            let waiting = waiters
            waiters.removeAll()
            for waiter in waiting { waiter.resume() }
        }
        let before = machine.state
        do {
            adopt(try await cloud.refresh(RefreshRequest(refreshToken: refreshToken)))
            logger.debug("renewed the cloud session")
        } catch let error where error.code == .unauthenticated {
            logger.notice("the cloud refused the refresh token; logging in again")
            machine.refreshRefused()
        } catch {
            logger.warning("renewing the cloud session failed", metadata: ["error": "\(error.message)"])
            machine.loginFailedTransiently()
            publishIfChanged(from: before)
            throw error
        }
        publishIfChanged(from: before)
    }

    /// Takes the token pair of a login or refresh answer.
    private func adopt(_ response: LoginResponse) {
        machine.loginSucceeded(
            token: response.accessToken,
            lifetime: .seconds(response.expiresIn),
            refreshToken: response.refreshToken,
            refreshLifetime: .seconds(response.refreshExpiresIn),
            now: .now
        )
    }

    /// Ends the session: the cloud revokes the tokens (best effort), and the next request logs in again.
    public func logout() async {
        if case .useToken(let token) = machine.tokenNeeded(now: .now) {
            try? await cloud.logout(token: token)
        }
        let before = machine.state
        machine.reset()
        publishIfChanged(from: before)
    }

    private func publishIfChanged(from before: SessionState) {
        let now = machine.state
        guard now != before else { return }
        for observer in stateObservers.values { observer(now) }
    }
}
