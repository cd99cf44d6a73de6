// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveSDK
import NIOCore
import Synchronization

/// The connections that asked for `session.changed`: each gets the cloud session's state and the realtime
/// connection's status whenever either changes, encoded once for all of them.
final class SessionWatch: Sendable {
    private struct State {
        var watchers: [UInt64: ConnectionOutbox] = [:]
        var current = SessionStateBody(session: "notLoggedIn", connection: "offline")
    }

    private let state = Mutex(State())

    /// Follows the engine's session and connection from now on.
    func attach(to engine: LiveClient) async {
        let session = await engine.session.state.rawValue
        let connection = await engine.connectionStatus.rawValue
        state.withLock { $0.current = SessionStateBody(session: session, connection: connection) }
        _ = await engine.session.addObserver { [self] session in update { $0.session = session.rawValue } }
        _ = await engine.addConnectionObserver { [self] status in update { $0.connection = status.rawValue } }
    }

    var current: SessionStateBody { state.withLock { $0.current } }

    func watch(_ connection: UInt64, _ outbox: ConnectionOutbox) {
        state.withLock { $0.watchers[connection] = outbox }
    }

    func unwatch(_ connection: UInt64) {
        _ = state.withLock { $0.watchers.removeValue(forKey: connection) }
    }

    private func update(_ change: (inout SessionStateBody) -> Void) {
        let (body, outboxes) = state.withLock { state -> (SessionStateBody?, [ConnectionOutbox]) in
            var next = state.current
            change(&next)
            guard next != state.current else { return (nil, []) }
            state.current = next
            return (next, Array(state.watchers.values))
        }
        guard let body, !outboxes.isEmpty,
            let frame = try? NotificationFrame.standalone(method: NotificationMethod.sessionChanged, params: body)
        else { return }
        for outbox in outboxes { outbox.enqueue(frame) }
    }
}
