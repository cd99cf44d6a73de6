// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveSDK
import NIOCore
import Synchronization
import Testing

/// The engine's HTTP connections, renewed when the cloud went silent: a request waiting on a connection that
/// will never answer fails at once instead of after its timeout, and the next request opens a new connection
/// instead of taking the silent one.
struct CloudConnectionsTests {
    @Test func renewingFailsTheRequestsWaitingOnSilentConnectionsAndConnectsAnew() async throws {
        let cloud = try SilentListener()
        defer { cloud.stop() }
        let connections = CloudConnections()
        let client = CloudClient(baseURL: "http://127.0.0.1:\(cloud.port)", connections: connections, timeout: .seconds(30))
        let key = EntityKey(collection: "notes", id: "n1")

        let started = ContinuousClock.now
        let waiting = Task { () -> LiveError? in
            do throws(LiveError) {
                _ = try await client.fetch(key, token: "t")
                return nil
            } catch {
                return error
            }
        }
        // The request's connection is made (the listener accepts it and never answers).
        try await eventually("the request's connection", timeout: .seconds(10)) { cloud.connections == 1 }
        connections.renew()
        let error = await waiting.value
        #expect(error?.code == .cloudUnavailable, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(10), "the request waited out its 30 s timeout")

        // The next request goes out on a connection of its own.
        let next = Task { try? await client.fetch(key, token: "t") }
        try await eventually("a second connection", timeout: .seconds(10)) { cloud.connections == 2 }
        connections.renew()
        _ = await next.value
    }
}

/// A TCP listener on 127.0.0.1 that accepts connections, counts them and never answers (a cloud gone silent).
private final class SilentListener: Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Mutex<[Int32]>([])

    init() throws {
        (listener, port) = try LoopbackSockets.listen(backlog: 16, what: "the silent listener")
        Thread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // the listener was shut down
                accepted.withLock { $0.append(connection) }
            }
        }.start()
    }

    var connections: Int { accepted.withLock { $0.count } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for connection in accepted.withLock({ $0 }) { close(connection) }
    }
}
