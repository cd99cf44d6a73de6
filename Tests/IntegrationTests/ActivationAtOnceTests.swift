// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// New observations told their cached copy in a burst are read from the cloud once the burst pauses
/// (`LiveSDKConfiguration.activationPause`); an observer that waits for fresh data is not held with them. Here
/// the pause and the longest wait are ten minutes, so a held observation is never read within the test: what
/// is read was read at once.
@Suite(.serialized) struct ActivationAtOnceTests {
    @Test func anObserverWaitingForFreshDataIsNotHeldWithABurst() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        let ids = ["first", "held", "flagged", "joined", "asked", "fresh-only"]
        for id in ids { try await cluster.put("notes", id, ["v": 1], token: token) }
        // A first engine caches version 1 of each.
        try await withEngine(cluster) { engine in
            try await eventually("the engine's realtime link") { await engine.connectionStatus == .connected }
            for id in ids {
                let seen = Received<LiveObjectChange>()
                let observation = await engine.object(collection: "notes", id: id).observe { seen.add($0) }
                try await seen.wait(for: "\(id) fresh") { $0.last?.dataStatus == .fresh }
                observation.invalidate()
            }
        }
        // The cloud moves on: a read brings version 2, the cache holds 1.
        for id in ids { try await cluster.put("notes", id, ["v": 2], token: token) }

        try await withEngine(cluster, activationPause: .seconds(600), activationLongestWait: .seconds(600)) { engine in
            func observe(_ id: String, activatesAtOnce: Bool = false, policy: ObservePolicy = .localThenFresh) async
                -> (NotificationToken, Received<LiveObjectChange>)
            {
                let seen = Received<LiveObjectChange>()
                let request = ObservationRequest(
                    key: EntityKey(collection: "notes", id: id),
                    options: ObserveOptions(policy: policy),
                    activatesAtOnce: activatesAtOnce
                ) { seen.add($0) }
                return (await engine.observe([request])[0], seen)
            }
            @Sendable func version(_ change: LiveObjectChange?) -> Int64? { change?.snapshot?.version }

            // One on its own is read at once.
            let (first, firstSeen) = await observe("first")
            try await firstSeen.wait(for: "first read") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }
            // The next, told its cached copy within the pause after it: a burst, held.
            let (held, heldSeen) = await observe("held")
            try await heldSeen.wait(for: "held's cached copy") { $0.last?.dataStatus == .local && version($0.last) == 1 }
            let (joined, joinedSeen) = await observe("joined")
            try await joinedSeen.wait(for: "joined's cached copy") { $0.last?.dataStatus == .local }
            let (asked, askedSeen) = await observe("asked")
            try await askedSeen.wait(for: "asked's cached copy") { $0.last?.dataStatus == .local }

            // Flagged: told its cached copy, then read at once.
            let (flagged, flaggedSeen) = await observe("flagged", activatesAtOnce: true)
            try await flaggedSeen.wait(for: "flagged read") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }
            #expect(flaggedSeen.all.first?.dataStatus == .local, "its cached copy first: \(flaggedSeen.all)")

            // A `freshOnly` observer: read at once, and told nothing before the read.
            let (freshOnly, freshOnlySeen) = await observe("fresh-only", policy: .freshOnly)
            try await freshOnlySeen.wait(for: "fresh-only read") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }
            #expect(!freshOnlySeen.all.contains { $0.dataStatus == .local }, "\(freshOnlySeen.all)")

            // A held observation that a `freshOnly` observer joins is read now, for both.
            let (joiner, joinerSeen) = await observe("joined", policy: .freshOnly)
            try await joinerSeen.wait(for: "joined read") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }
            try await joinedSeen.wait(for: "joined read, first observer") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }

            // And one asked for by key (the daemon's `freshOnly` token joining a topic).
            await engine.activateAtOnce([EntityKey(collection: "notes", id: "asked")])
            try await askedSeen.wait(for: "asked read") { $0.last?.dataStatus == .fresh && version($0.last) == 2 }

            // Held all along: still its cached copy only.
            #expect(heldSeen.all.allSatisfy { $0.dataStatus == .local && version($0) == 1 }, "\(heldSeen.all)")
            withExtendedLifetime([first, held, joined, asked, flagged, freshOnly, joiner]) {}
        }
    }
}
