// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol

/// How an observation of a typed handle runs: the daemon's token is made on a connection and its events are
/// delivered one after another; through a ``LiveGateClient`` it is made again on each new connection after
/// one is lost, the observer being told of the loss (`lost`) and of the new start (`resumed`).
struct ObservationLoop<Event: Sendable>: Sendable {
    let source: ConnectionSource
    /// A `once` observation: its daemon token ends by itself, and is not released.
    let once: Bool
    /// Makes the daemon's token on `connection`.
    let observe: @Sendable (LiveGateConnection) async throws -> (token: Int64, events: AsyncThrowingStream<Event, any Error>)

    /// Makes the first token (the daemon's refusal is thrown here), then delivers in a task of its own until
    /// the returned token ends: `deliver` for each event (returning false ends the observation), `lost` when
    /// the connection is lost, `resumed` once the token is made again, `refused` (and the end) when the
    /// daemon no longer accepts the observation, and `ended` when the delivery ends, however it does.
    func start<State: Sendable>(
        _ initial: State,
        ended: @escaping @Sendable () -> Void = {},
        deliver: @escaping @Sendable (inout State, Event) async -> Bool,
        lost: @escaping @Sendable (inout State) async -> Void = { _ in },
        resumed: @escaping @Sendable (inout State) async -> Void = { _ in },
        refused: @escaping @Sendable (inout State, LiveGateError) async -> Void = { _, _ in }
    ) async throws -> NotificationToken {
        let first = try await source.currentConnected()
        let made = try await observe(first.connection)
        let token = NotificationToken(releasesDaemonToken: !once)
        _ = token.bind(first.connection, made.token)
        let task = Task { [source, once, observe, weak token] in
            defer { ended() }
            var state = initial
            var connected = first
            var events = made.events
            var daemonToken = made.token
            while true {
                do {
                    for try await event in events {
                        if Task.isCancelled { return }
                        if await !deliver(&state, event) { return }
                    }
                    return  // the daemon's token ended: invalidated, or its `once` was delivered
                } catch {
                    if Task.isCancelled { return }
                }
                if !connected.connection.isClosed {
                    // The connection lives but the events failed (a window that stopped fitting): start again.
                    connected.connection.releaseInBackground(daemonToken)
                } else {
                    guard source.reconnects else { return }
                    await lost(&state)
                }
                var failures = 0
                while true {
                    if connected.connection.isClosed {
                        guard let next = await source.connection(after: connected.generation) else { return }
                        connected = next
                    }
                    do {
                        let remade = try await observe(connected.connection)
                        guard let token, token.bind(connected.connection, remade.token) else {
                            if !once { connected.connection.releaseInBackground(remade.token) }
                            return
                        }
                        events = remade.events
                        daemonToken = remade.token
                        break
                    } catch let error as LiveGateError where error.refusesObservation {
                        await refused(&state, error)
                        token?.invalidate()
                        return
                    } catch {
                        // Lost again, or the daemon is busy (`cloudUnavailable`, `limitExceeded`): try again soon.
                        failures += 1
                        do {
                            try await Task.sleep(for: .milliseconds(50 * min(failures, 20)))
                        } catch {
                            return
                        }
                    }
                }
                await resumed(&state)
            }
        }
        token.attach(task)
        return token
    }
}

extension LiveGateError {
    /// The daemon refused the observation itself (bad names, not permitted): making it again will not help.
    var refusesObservation: Bool {
        guard let code else { return false }
        return code != .cloudUnavailable && code != .limitExceeded
    }
}
