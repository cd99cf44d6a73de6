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
        try await cloud.waitForConnections(1, timeout: .seconds(10))
        connections.renew()
        let error = await waiting.value
        #expect(error?.code == .cloudUnavailable, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(10), "the request waited out its 30 s timeout")

        // The next request goes out on a connection of its own.
        let next = Task { try? await client.fetch(key, token: "t") }
        try await cloud.waitForConnections(2, timeout: .seconds(10))
        connections.renew()
        _ = await next.value
    }
}

/// A TCP listener on 127.0.0.1 that accepts connections, counts them and never answers (a cloud gone silent).
private final class SilentListener: Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Accepted()

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            close(listener)
            throw SilentListenerError()
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let accepted = self.accepted
        let thread = Thread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // the listener was shut down
                accepted.withLock { $0.append(connection) }
            }
        }
        thread.start()
    }

    var connections: Int { accepted.withLock { $0.count } }

    func waitForConnections(_ count: Int, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while connections < count {
            guard ContinuousClock.now < deadline else { throw SilentListenerError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for connection in accepted.withLock({ $0 }) { close(connection) }
    }
}

private struct SilentListenerError: Error {}

/// The connections a ``SilentListener`` accepted (shared with its accepting thread).
private final class Accepted: Sendable {
    private let sockets = Mutex<[Int32]>([])
    func withLock<T>(_ body: (inout [Int32]) -> T) -> T { sockets.withLock { body(&$0) } }
}
