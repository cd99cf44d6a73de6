// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import Synchronization

/// A client of `livegated` that outlives the daemon: it holds one connection, and when the daemon restarts
/// (or the connection is lost) it reconnects with backoff (0.1 s doubling to 5 s, with jitter) and every
/// live observation made through it is observed again on the new connection, transparently.
///
/// ```swift
/// let daemon = try await LiveGateClient.connect(client: "my-app")
/// let note = daemon.object(collection: "notes", id: "n1", as: Note.self)
/// let token = try await note.observe { snapshot in print(snapshot.model?.text ?? "-", snapshot.loadingStatus) }
/// ```
///
/// Across a restart an object's observers see `loadingStatus` go to `loading` and back to `loaded`, never a
/// lost or repeated snapshot version; a collection's see their window `loading`, then the whole window again
/// (`reset`, with its pages); stream listeners and feed subscribers get a `resync` event (what was sent while
/// the daemon was away is not replayed). Requests made while the daemon is away wait for it up to
/// `requestWait`, then fail with a ``LiveGateError`` naming the socket and the last connection error.
/// The client stays connected until ``close()`` or until it and every observation made through it are released.
public final class LiveGateClient: Sendable {
    public let socketPath: String
    public let name: String
    /// How long a request waits for the daemon when it is away.
    public let requestWait: Duration
    private let link: Link
    private let task: Task<Void, Never>

    /// Starts connecting (in the background) and keeps connected until closed.
    public init(socketPath: String = LiveGateConnection.defaultSocketPath, client: String, requestWait: Duration = .seconds(10)) {
        self.socketPath = socketPath
        self.name = client
        self.requestWait = requestWait
        let link = Link()
        self.link = link
        task = Task { await link.run(socketPath: socketPath, client: client) }
    }

    /// A client connected to the daemon at `socketPath`.
    /// - Throws: ``LiveGateError`` when no connection is made within `timeout` (the daemon is not running), with
    ///   the reason; at once, of kind `.refused`, when the daemon refuses this client (its access policy, or
    ///   its connection limit).
    public static func connect(
        socketPath: String = LiveGateConnection.defaultSocketPath,
        client: String,
        timeout: Duration = .seconds(10)
    ) async throws -> LiveGateClient {
        let daemon = LiveGateClient(socketPath: socketPath, client: client)
        do {
            _ = try await daemon.link.connection(after: 0, timeout: timeout, socketPath: socketPath)
        } catch {
            daemon.close()
            throw error
        }
        return daemon
    }

    /// The connection now, waiting up to `requestWait` for one while the daemon is away.
    public func connection() async throws -> LiveGateConnection {
        try await currentConnected().connection
    }

    func currentConnected() async throws -> Link.Connected {
        try await link.connection(after: 0, timeout: requestWait, socketPath: socketPath)
    }

    /// Whether a connection to the daemon is up now.
    public var isConnected: Bool { link.isConnected }

    /// Closes the connection and stops reconnecting; observations made through the client end.
    public func close() {
        link.close()
        task.cancel()
    }

    deinit { close() }

    /// The connection after `generation` (0: any), as long as it takes; `nil` once the client is closed.
    func connection(after generation: Int) async -> Link.Connected? {
        try? await link.connection(after: generation, timeout: nil, socketPath: socketPath)
    }

    /// The connection loop and who waits for it.
    final class Link: Sendable {
        struct Connected: Sendable {
            let connection: LiveGateConnection
            /// Counts the connections made: a new one is newer than every one before it.
            let generation: Int
        }

        private typealias Waiter = CheckedContinuation<Connected?, Never>

        private struct State {
            var current: Connected?
            var generation = 0
            var waiters: [Int: Waiter] = [:]
            var nextWaiter = 0
            var closed = false
            var lastFailure: LiveGateError?
        }

        private let state = Mutex(State())

        var isConnected: Bool { state.withLock { $0.current != nil } }

        func run(socketPath: String, client: String) async {
            var failures = 0
            while !Task.isCancelled {
                do {
                    try await LiveGateConnection.withConnection(socketPath: socketPath, client: client) { connection in
                        failures = 0
                        publish(connection)
                        await withTaskCancellationHandler {
                            await connection.waitUntilClosed()
                        } onCancel: {
                            connection.close()
                        }
                    }
                } catch let error as LiveGateError {
                    let waiters = state.withLock { state -> [Waiter] in
                        state.lastFailure = error
                        // A refusal is not a daemon that is away: whoever waits is told now, with its reason.
                        guard error.kind == .refused else { return [] }
                        defer { state.waiters.removeAll() }
                        return Array(state.waiters.values)
                    }
                    for waiter in waiters { waiter.resume(returning: nil) }
                } catch {
                    state.withLock { $0.lastFailure = LiveGateError.connection("\(error)") }
                }
                state.withLock { $0.current = nil }
                failures += 1
                let base = min(5.0, 0.1 * Double(1 << min(failures - 1, 6)))
                do {
                    try await Task.sleep(for: .seconds(base * Double.random(in: 0.5...1.0)))
                } catch {
                    break
                }
            }
            close()
        }

        private func publish(_ connection: LiveGateConnection) {
            let (connected, waiters) = state.withLock { state -> (Connected, [Waiter]) in
                state.generation += 1
                let connected = Connected(connection: connection, generation: state.generation)
                state.current = connected
                state.lastFailure = nil
                defer { state.waiters.removeAll() }
                return (connected, Array(state.waiters.values))
            }
            for waiter in waiters { waiter.resume(returning: connected) }
        }

        func close() {
            let (current, waiters) = state.withLock { state -> (Connected?, [Waiter]) in
                state.closed = true
                defer {
                    state.waiters.removeAll()
                    state.current = nil
                }
                return (state.current, Array(state.waiters.values))
            }
            current?.connection.close()
            for waiter in waiters { waiter.resume(returning: nil) }
        }

        /// The connection after `generation`, waiting for it up to `timeout` (`nil`: as long as it takes).
        /// - Throws: ``LiveGateError`` when the client is closed, or none comes in time.
        func connection(after generation: Int, timeout: Duration?, socketPath: String) async throws -> Connected {
            let connected: Connected?
            if let timeout {
                connected = await withTaskGroup(of: Connected?.self) { group in
                    group.addTask { await self.wait(after: generation) }
                    group.addTask {
                        try? await Task.sleep(for: timeout)
                        return nil
                    }
                    let first = await group.next() ?? nil
                    group.cancelAll()
                    return first
                }
            } else {
                connected = await wait(after: generation)
            }
            if let connected { return connected }
            let (closed, failure) = state.withLock { ($0.closed, $0.lastFailure) }
            if closed { throw LiveGateError.connection("this LiveGateClient is closed") }
            if let failure, failure.kind == .refused { throw failure }
            throw LiveGateError.connection(
                "livegated at \(socketPath) is not reachable (still trying)" + (failure.map { ": \($0.message)" } ?? "")
            )
        }

        /// The connection after `generation`; `nil` when the client closes or the waiting task is cancelled.
        private func wait(after generation: Int) async -> Connected? {
            let id = state.withLock { state -> Int in
                state.nextWaiter += 1
                return state.nextWaiter
            }
            return await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { state -> Connected?? in
                        if state.closed || Task.isCancelled { return .some(nil) }
                        if let current = state.current, current.generation > generation { return .some(current) }
                        state.waiters[id] = continuation
                        return .none
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume(returning: nil)
            }
        }
    }
}
