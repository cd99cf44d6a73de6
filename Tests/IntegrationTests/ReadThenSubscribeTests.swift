// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// A new observation reads its object first, then subscribes its topic from the read (see `LiveClient.activate`).
@Suite(.serialized) struct ReadThenSubscribeTests {
    /// Observed, released while its read is held up by the cloud, and observed anew before that read is answered:
    /// the new observation's topic is subscribed all the same, so it hears a later change. (It was not: the new
    /// observation was told to fetch after the old one's fetch, and a fetch alone subscribes nothing.)
    @Test func anObjectObservedAgainWhileItsFirstReadRunsIsSubscribed() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "r1", ["n": 1], token: token)
        let key = EntityKey(collection: "posts", id: "r1")
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            try await cluster.fault(#"{"delayRequestsMs":600}"#)
            let first = await engine.object(collection: "posts", id: "r1").observe { _ in }
            try await eventually("the first observation's read sent") { await !engine.objectStarts.fetchBatches.waiters.isEmpty }
            first.invalidate()
            try await eventually("the first observation released") { await engine.objects.observations[key] == nil }
            let changes = Received<LiveObjectChange>()
            let second = await engine.object(collection: "posts", id: "r1").observe { changes.add($0) }
            try await cluster.fault(#"{"delayRequestsMs":0}"#)
            try await changes.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh && $0.last?.snapshot?.version == 1 }
            try await eventually("the object's topic subscribed") {
                try await cluster.stats().subscriptions["object:posts/r1"] == 1
            }
            try await cluster.put("posts", "r1", ["n": 2], token: token)
            try await changes.wait(for: "v2, heard live") { $0.last?.snapshot?.version == 2 }
            withExtendedLifetime(second) {}
        }
    }

    /// Writes landing between a new observation's read and its subscription from that read are replayed by the
    /// cloud, and each is told: the read was told `fresh`/`loaded`, so any later version must follow it one by
    /// one (or after a resync notice). They were replayed silently and told once caught up: only the last, a
    /// skip with no notice (found by the live-semantics checker once it observed objects anew under writes).
    @Test func writesBetweenTheReadAndTheSubscriptionAreEachTold() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("posts", "w1", ["n": 1], token: token)
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            // The subscription from the read waits in the cloud, and replays from the read once handled.
            try await cluster.fault(#"{"delayRealtimeRequestsMs":1000}"#)
            let changes = Received<LiveObjectChange>()
            let observation = await engine.object(collection: "posts", id: "w1").observe { changes.add($0) }
            try await changes.wait(for: "fresh v1, the read") { $0.last?.dataStatus == .fresh && $0.last?.snapshot?.version == 1 }
            try await cluster.put("posts", "w1", ["n": 2], token: token)
            try await cluster.put("posts", "w1", ["n": 3], token: token)
            try await cluster.fault(#"{"delayRealtimeRequestsMs":0}"#)
            try await eventually("the object's topic subscribed") { try await cluster.stats().subscriptions["object:posts/w1"] == 1 }
            try await changes.wait(for: "v3") { $0.last?.snapshot?.version == 3 }
            let told = changes.all.filter { $0.dataStatus == .fresh && $0.loadingStatus == .loaded }.compactMap { $0.snapshot?.version }
            #expect(
                told == [1, 2, 3],
                "fresh and loaded at v1, then every version after it: \(changes.all.map { "\($0.snapshot?.version ?? 0) \($0.dataStatus)/\($0.loadingStatus)" })"
            )
            #expect(!changes.all.contains { $0.resync }, "nothing was missed: no resync notice")
            withExtendedLifetime(observation) {}
        }
    }

    /// A burst of more new observations than may await their subscription at once: no more than that many do,
    /// and every one is subscribed (those that waited their turn too), reading nothing twice.
    @Test func aBurstBeyondTheSubscriptionsInFlightIsSubscribedWholeAndNoWiderThanThem() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let count = LiveClient.subscriptionsInFlight + 500
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            let before = try await cluster.stats()
            let loaded = Received<EntityKey>()
            // All at once, as the daemon starts a connection's pipelined observations (each `observe` returns
            // once its start is read from the cache, with a batch of others).
            let tokens = await withTaskGroup(of: NotificationToken.self) { group in
                for index in 0..<count {
                    // Objects that do not exist: read and subscribed all the same, at no cost to the cloud's store.
                    group.addTask {
                        await engine.object(collection: "burst", id: "o\(index)").observe { change in
                            if change.loadingStatus == .loaded { loaded.add(EntityKey(collection: "burst", id: "o\(index)")) }
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            try await loaded.wait(for: "every observation read") { Set($0).count == count }
            try await eventually("every topic subscribed", timeout: .seconds(60)) {
                try await cluster.stats().subscriptions.keys.count(where: { $0.hasPrefix("object:burst/") }) == count
            }
            let most = await engine.objectStarts.subscriptionGate.mostRunning
            #expect(most <= LiveClient.subscriptionsInFlight, "\(most) subscriptions awaited their answer at once")
            #expect(most >= LiveClient.subscriptionsInFlight / 2, "the burst went through the gate wide (\(most) at most)")
            let reads = try await cluster.stats().readRequests - before.readRequests
            #expect(reads <= count / 50, "\(reads) read requests for \(count) objects")
            withExtendedLifetime(tokens) {}
        }
    }
}
