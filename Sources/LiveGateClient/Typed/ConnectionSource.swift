// Licensed under the Apache License, Version 2.0.

/// Where a typed handle (``LiveObject``, ``LiveCollection``, ``LiveStream``, ``LiveFeed``) gets its
/// connection: one connection, whose end ends the handle's observations, or a ``LiveGateClient``, whose
/// observations are made again on each new connection.
enum ConnectionSource: Sendable {
    case connection(LiveGateConnection)
    case client(LiveGateClient)

    /// The connection for a request now (a client waits for one up to its `requestWait`).
    func current() async throws -> LiveGateConnection {
        try await currentConnected().connection
    }

    /// The connection now with its generation.
    func currentConnected() async throws -> LiveGateClient.Link.Connected {
        switch self {
        case .connection(let connection): LiveGateClient.Link.Connected(connection: connection, generation: 1)
        case .client(let client): try await client.currentConnected()
        }
    }

    var reconnects: Bool {
        if case .client = self { return true }
        return false
    }

    /// The connection to observe on after the one of `generation` (0 for the first), waiting as long as it
    /// takes; `nil` when there will be none (a single connection after its end; a closed client).
    func connection(after generation: Int) async -> LiveGateClient.Link.Connected? {
        switch self {
        case .connection(let connection):
            generation == 0 ? LiveGateClient.Link.Connected(connection: connection, generation: 1) : nil
        case .client(let client):
            await client.connection(after: generation)
        }
    }
}
