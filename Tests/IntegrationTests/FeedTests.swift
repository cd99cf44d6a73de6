// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

/// Collection feeds (Kinvey's collection subscription) through the daemon: ready, then every change in the
/// cloud's order, deletions included; shared and encoded once; none lost across a dropped connection.
@Suite(.serialized) struct FeedTests {
    @Test func everyChangeReachesEverySubscriberInOrderDeletionsIncluded() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "feed-1") { first in
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "feed-2") { second in
                let queues = [
                    Queue(try await first.subscribeFeed(collection: "messages").events),
                    Queue(try await second.subscribeFeed(collection: "messages").events),
                ]
                for queue in queues {
                    let ready = try await elements(queue, until: "ready") { $0.event == .ready }
                    #expect(ready.count == 1, "ready comes first: \(ready)")
                }
                #expect(try await cluster.stats().subscriptions["collection:messages"] == 1, "one cloud subscription for both")
                let before = try await first.request(Method.daemonStats, [String: Int](), as: DaemonStats.self)

                try await cluster.put("messages", "m1", ["text": "hello"], token: token)
                try await cluster.put("messages", "m1", ["text": "edited"], token: token)
                try await cluster.put("other", "o1", ["text": "not this collection"], token: token)
                try await cluster.delete("messages", "m1")
                for queue in queues {
                    let seen = try await elements(queue, until: "the deletion") { $0.deleted == true }
                    #expect(seen.map(\.event) == [.next, .next, .next], "\(seen)")
                    #expect(seen.map { $0.snapshot?.version } == [1, 2, 3])
                    #expect(seen.first?.snapshot?.data == ["text": "hello"])
                    #expect(seen.map(\.seq).compactMap { $0 } == seen.map(\.seq).compactMap { $0 }.sorted() && seen.allSatisfy { $0.seq != nil })
                }
                let after = try await first.request(Method.daemonStats, [String: Int](), as: DaemonStats.self)
                #expect(after.feedBodiesEncoded == before.feedBodiesEncoded + 3, "each change encoded once for both tokens")

                // Refusals are errors; the connection goes on.
                let bad = await #expect(throws: LiveGateError.self) { _ = try await first.subscribeFeed(collection: "no/such") }
                #expect(bad?.code == .invalidParams)
            }
        }
        try await eventually("closing the connections releases the cloud subscription") {
            try await cluster.stats().subscriptions["collection:messages"] == nil
        }
    }

    @Test func aDroppedConnectionLosesNoChangeAndSaysSo() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "feed") { daemon in
            let queue = Queue(try await daemon.subscribeFeed(collection: "messages").events)
            _ = try await elements(queue, until: "ready") { $0.event == .ready }
            try await cluster.put("messages", "a", ["n": 1], token: token)
            _ = try await elements(queue, until: "the first change") { $0.event == .next }

            // The link drops; changes happen while it is down; the daemon reconnects and resumes.
            try await cluster.fault(#"{"dropConnections":true,"refuseConnectionsForMs":500}"#)
            try await eventually("the link to drop") { try await cluster.stats().connections == 0 }
            for n in 2...11 { try await cluster.put("messages", "a", ["n": .integer(n)], token: token) }
            let seen = try await elements(queue, until: "version 11") { $0.snapshot?.version == 11 }
            let versions = seen.compactMap { $0.event == .next ? $0.snapshot?.version : nil }
            #expect(versions == Array(2...11), "every missed change, in order, none twice: \(seen)")
            #expect(seen.contains { $0.event == .status && $0.status == "reconnecting" }, "\(seen)")
            #expect(seen.contains { $0.event == .status && $0.status == "connected" }, "\(seen)")
            #expect(!seen.contains { $0.event == .resync }, "the cloud could replay: no resync")
        }
    }
}
