// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// `session.state` / `session.changed`, `daemon.stats`, and re-observing with the last version seen.
@Suite(.serialized) struct SessionAndStatsTests {
    static let hello = #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"t","protocol":1}}"#

    @Test func sessionChangesReachTheConnectionsThatAsked() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await RawConnection.with(cluster.socketPath) { client in
            try await client.send(Self.hello)
            _ = try await client.next()
            try await client.send(#"{"jsonrpc":"2.0","id":2,"method":"session.state","params":{"watch":true}}"#)
            let answer = try await client.next()
            // The cloud counts the realtime connection once upgraded, the daemon calls it connected once its handshake
            // is done (a clean-clone CI run asked in between): connected, or told so next.
            if answer == #"{"id":2,"jsonrpc":"2.0","result":{"connection":"connecting","session":"established"}}"# {
                let connected = try await client.next()
                #expect(connected == #"{"jsonrpc":"2.0","method":"session.changed","params":{"connection":"connected","session":"established"}}"#)
            } else {
                #expect(answer == #"{"id":2,"jsonrpc":"2.0","result":{"connection":"connected","session":"established"}}"#)
            }
            // The cloud drops every realtime connection: the client hears the link go and come back.
            try await cluster.fault(#"{"dropConnections":true}"#)
            let lost = try await client.next()
            #expect(lost.contains(#""method":"session.changed""#) && lost.contains(#""connection":"reconnecting""#), "\(lost)")
            var back = try await client.next()
            while back.contains(#""connection":"connecting""#) { back = try await client.next() }
            #expect(back.contains(#""connection":"connected""#), "\(back)")
        }
    }

    @Test func statsCountConnectionsTokensAndSharedObservations() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await cluster.put("notes", "s1", ["v": 1])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "a") { a in
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "b") { b in
                _ = try await change(Queue(try await a.observeObject(collection: "notes", id: "s1").changes), "fresh") { $0.dataStatus == .fresh }
                _ = try await change(Queue(try await b.observeObject(collection: "notes", id: "s1").changes), "fresh") { $0.dataStatus == .fresh }
                let stats = try await a.request(Method.daemonStats, [String: JSONValue](), as: DaemonStats.self)
                #expect(stats.connections == 2 && stats.tokens == 2)
                #expect(stats.observedObjects == 1 && stats.objectTokens == 2)
                #expect(stats.session.session == "established")
            }
        }
    }

    @Test func reObservingWithTheLastVersionSeenSendsNothingOlderOrEqual() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "r1", ["v": 1])
        try await cluster.put("notes", "r1", ["v": 2])
        let seen = try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "first") { client in
            let changes = Queue(try await client.observeObject(collection: "notes", id: "r1").changes)
            return try await change(changes, "fresh v2") { $0.dataStatus == .fresh }.snapshot?.version ?? 0
        }
        #expect(seen == 2)
        // The client comes back (a reconnection, or a restart of the client): it says what it saw.
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "again") { client in
            let changes = Queue(try await client.observeObject(collection: "notes", id: "r1", sinceVersion: seen).changes)
            try await cluster.put("notes", "r1", ["v": 3])
            // Until the token is told something new, nothing at or below version 2 comes: the first notification
            // is that version 2 is current (`unchanged`, no data) or version 3.
            let first = try await change(changes, "the first notification") { _ in true }
            if first.unchanged == true {
                #expect(first.snapshot == nil && first.dataStatus == .fresh && first.loadingStatus == .loaded, "\(first)")
                // Told, the token hears the full state like any other (Protocol/ipc, `sinceVersion`): a refresh of
                // version 2 may be told (`loading`, then `loaded`), never an older version, and version 3 comes.
                var next = try await change(changes, "the notification after unchanged") { _ in true }
                while next.snapshot?.version != 3 {
                    #expect(next.snapshot?.version == 2 && next.resync != true, "only version 2's statuses may come: \(next)")
                    next = try await change(changes, "version 3") { _ in true }
                }
            } else {
                #expect(first.snapshot?.version == 3, "nothing at or below version 2 may come first: \(first)")
            }
        }
    }
}

/// A token that names the fields it cares about hears only of changes to them; other tokens hear everything.
@Suite(.serialized) struct FieldFilterTests {
    @Test func aFieldFilterIsExclusiveToItsToken() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("posts", "p", ["title": "a", "likes": 0])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "fields") { client in
            let likes = Queue(try await client.observeObject(collection: "posts", id: "p", fields: ["likes"]).changes)
            let all = Queue(try await client.observeObject(collection: "posts", id: "p").changes)
            _ = try await change(likes, "fresh") { $0.dataStatus == .fresh }
            _ = try await change(all, "fresh") { $0.dataStatus == .fresh }
            try await cluster.put("posts", "p", ["title": "b", "likes": 0])  // v2: the title only
            try await cluster.put("posts", "p", ["title": "b", "likes": 1])  // v3: the likes
            let everything = try await change(all, "v3") { $0.snapshot?.version == 3 }
            #expect(everything.snapshot?.data["likes"] == 1)
            let next = try await change(likes, "the likes change") { _ in true }
            #expect(next.snapshot?.version == 3, "the title-only change (v2) must not reach the likes token: \(next)")
        }
        await #expect(throws: LiveGateError.self) {
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "bad") { client in
                _ = try await client.observeObject(collection: "posts", id: "p", fields: ["a.b"])
            }
        }
    }
}
