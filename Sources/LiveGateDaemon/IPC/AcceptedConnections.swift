// Licensed under the Apache License, Version 2.0.

import NIOCore
import Synchronization

/// Accepted connections from the moment their channel is set up until the server's accept loop takes them.
///
/// NIO hands an accepted connection to the accept loop through the listener's stream, and a connection it
/// drops on the way (held in that stream when its iteration ends, or set up just as the listener closed:
/// swift-nio #2637) is an `NIOAsyncChannel` nobody finishes, which NIO traps on ("Deinited NIOAsyncWriter
/// without calling finish()"). Held here, each connection is either taken and served, or closed by
/// ``stop()``; once stopped, a connection set up later is refused (its channel closed by NIO).
package final class AcceptedConnections<Connection: Sendable>: Sendable {
    private struct State {
        var accepting = true
        var waiting: [ObjectIdentifier: Connection] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// The server has stopped accepting: a connection set up now is refused.
    package struct Stopped: Error, CustomStringConvertible {
        package var description: String { "the daemon is shutting down and accepts no new connection" }
    }

    /// Makes the connection of `channel` (in its channel initializer) and holds it until ``take(_:)``.
    package func admit(_ channel: any Channel, make: () throws -> Connection) throws -> Connection {
        try state.withLock { state in
            guard state.accepting else { throw Stopped() }
            let connection = try make()
            state.waiting[ObjectIdentifier(channel)] = connection
            return connection
        }
    }

    /// Takes the connection of `channel` to serve it; `false` when ``stop()`` already took it.
    package func take(_ channel: any Channel) -> Bool {
        state.withLock { $0.waiting.removeValue(forKey: ObjectIdentifier(channel)) != nil }
    }

    /// Accepts no more; returns the connections admitted and never taken, for the caller to close.
    package func stop() -> [Connection] {
        state.withLock { state in
            state.accepting = false
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
    }

    /// How many connections are admitted and not yet taken.
    package var waitingCount: Int { state.withLock { $0.waiting.count } }
}
