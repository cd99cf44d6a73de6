// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// What observers hear while the cloud refuses connections: the failure at once, then quiet retries until
/// the cloud is back.
@Suite(.serialized) struct CloudOutageTests {
    @Test func aRefusedConnectionIsSaidAtOnceThenRetriedQuietlyUntilTheCloudIsBack() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("notes", "n1", ["text": "before"], token: token)
        cluster.killCloud()
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "outage") { client in
            let plain = Queue(try await client.observeObject(collection: "notes", id: "n1").changes)
            let freshOnly = Queue(try await client.observeObject(collection: "notes", id: "n1", policy: .freshOnly).changes)
            // Said within a few seconds (it took 10 s: the HTTP client retried the refused connection until its
            // connect timeout before the engine heard of it).
            let failing = try await withTimeout(.seconds(5), "the failure, said at once") {
                try await elements(plain, until: "the error") { $0.loadingStatus == .error }
            }
            #expect(failing.last?.error?.code == .cloudUnavailable, "\(failing)")
            #expect(failing.last?.error?.message.contains("refused") == true, "\(failing)")
            // A freshOnly token hears the failure too, as its first notification.
            let first = try await withTimeout(.seconds(5), "the freshOnly token's first notification") { try await freshOnly.next() }
            #expect(first?.loadingStatus == .error && first?.error?.code == .cloudUnavailable, "\(String(describing: first))")

            // The daemon retries (its log counts the attempts); observers are not told loading/error each time.
            try await eventually("two retries", timeout: .seconds(20)) { cluster.daemonLog.contains("attempt=3") }
            try await cluster.restartCloud()
            let recovering = try await elements(plain, until: "the cloud's data") { $0.dataStatus == .fresh && $0.loadingStatus == .loaded }
            #expect(recovering.last?.snapshot?.data == ["text": "before"])
            #expect(!recovering.dropLast().contains { $0.loadingStatus == .loading }, "no loading per retry: \(recovering)")
            #expect(recovering.count == 1, "the retries were quiet: \(recovering)")
            let recovered = try await elements(freshOnly, until: "the cloud's data") { $0.dataStatus == .fresh }
            #expect(recovered.count == 1, "\(recovered)")
        }
    }
}
