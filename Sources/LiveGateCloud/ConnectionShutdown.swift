// Licensed under the Apache License, Version 2.0.

import Synchronization

/// The server's graceful shutdown as one connection's handlers hear it: the realtime route closes its WebSocket
/// on it (1001, with the reason), and an injected fault's wait ends on it (``FaultInjector/wait(_:)``).
///
/// ``CloudChildChannel`` handles each connection in a task that does not inherit ServiceLifecycle's graceful
/// shutdown, and triggers this instead. Had it inherited it, swift-websocket's `WebSocketHandler` would, on
/// shutdown, start a close of its own (1000) in an unstructured task. That close took the connection's close
/// state first, so the route's close did nothing and returned at once; the connection was then closed, and
/// when that came before the task had handed its frame to the channel (a race that is lost about once in 50
/// connections on a busy machine), the client saw the connection end without a close frame.
package final class ConnectionShutdown: Sendable {
    /// The connection's shutdown, in the tasks that handle it (`nil` elsewhere).
    @TaskLocal package static var current: ConnectionShutdown?

    private struct State {
        var triggered = false
        var nextID = 0
        var handlers: [(id: Int, handler: @Sendable () -> Void)] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Calls the handlers registered so far, in the order they were registered, once; later ones are called as
    /// they register.
    package func trigger() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.triggered else { return [] }
            state.triggered = true
            defer { state.handlers = [] }
            return state.handlers.map(\.handler)
        }
        for handler in handlers { handler() }
    }

    /// Runs `operation`; calls `handler` when the connection's shutdown is triggered while it runs, or at once
    /// if it already was. Without a connection shutdown (outside ``CloudChildChannel``), runs `operation` alone.
    package static func withHandler<T>(
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> T,
        onShutdown handler: @escaping @Sendable () -> Void
    ) async rethrows -> T {
        guard let shutdown = current else { return try await operation() }
        let id = shutdown.register(handler)
        defer { if let id { shutdown.remove(id) } }
        return try await operation()
    }

    /// Adds `handler` and returns its id, or calls it and returns `nil` when the shutdown was triggered already.
    private func register(_ handler: @escaping @Sendable () -> Void) -> Int? {
        let id = state.withLock { state -> Int? in
            guard !state.triggered else { return nil }
            defer { state.nextID += 1 }
            state.handlers.append((state.nextID, handler))
            return state.nextID
        }
        if id == nil { handler() }
        return id
    }

    private func remove(_ id: Int) {
        state.withLock { $0.handlers.removeAll { $0.id == id } }
    }
}
