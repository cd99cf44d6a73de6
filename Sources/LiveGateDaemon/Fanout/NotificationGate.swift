// Licensed under the Apache License, Version 2.0.

import LiveSDK
import NIOCore
import Synchronization

/// Holds a new token's notifications until its answer (`{"token": N}`) is queued, for tokens whose
/// subscription must succeed before the answer can be sent (streams and feeds: the cloud may refuse). Once
/// open, notifications go straight to the outbox; none is ever coalesced (each is news).
final class NotificationGate: Sendable {
    private struct State {
        var isOpen = false
        var held: [(prefix: ByteBuffer, body: ByteBuffer)] = []
    }

    private let state = Mutex(State())
    private let outbox: ConnectionOutbox
    private let token: Int64

    init(outbox: ConnectionOutbox, token: Int64) {
        self.outbox = outbox
        self.token = token
    }

    /// Lets the token's notifications through: those held are queued first, in order.
    func open() {
        state.withLock { state in
            for item in state.held { outbox.append(token: token, prefix: item.prefix, body: item.body) }
            state.held.removeAll()
            state.isOpen = true
        }
    }

    /// Queues one notification (held while the gate is closed).
    func pass(_ prefix: ByteBuffer, _ body: ByteBuffer) {
        state.withLock { state in
            if state.isOpen {
                outbox.append(token: token, prefix: prefix, body: body)
            } else {
                state.held.append((prefix, body))
            }
        }
    }
}

/// A connection token behind a gate (a stream listener, a feed subscription): the SDK's token and the gate
/// its notifications wait behind until the token's answer is queued.
struct GatedSubscription: Sendable {
    let sdkToken: NotificationToken
    let gate: NotificationGate

    /// Lets the token's notifications through (those that arrived before are written first, in order).
    func open() { gate.open() }
}
