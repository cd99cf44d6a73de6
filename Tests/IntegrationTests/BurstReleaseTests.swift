// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import NIOCore
import Testing

/// Observations ended while their topics' subscriptions still wait their turn (a burst's subscriptions go out
/// a few batches at a time, after the reads) leave nothing subscribed.
@Suite(.serialized) struct BurstReleaseTests {
    @Test func aBurstEndedBeforeItsSubscriptionsAreMadeLeavesNoTopicSubscribed() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let burst = 5_000
        var observes = ""
        for n in 1...burst {
            observes += #"{"jsonrpc":"2.0","id":\#(n),"method":"object.observe","params":{"collection":"burst","id":"b\#(n)"}}"# + "\n"
        }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.sendBytes(.init(string: observes))
            // Closed once every object is read (loaded), while most subscriptions still wait.
            try await withTimeout(.seconds(300), "\(burst) observations loaded") {
                var loaded = 0
                while loaded < burst {
                    if try await raw.next(timeout: .seconds(60)).contains(#""loadingStatus":"loaded""#) { loaded += 1 }
                }
            }
        }
        // The topics linger 2 s after their last observer, then are unsubscribed.
        try await eventually("every topic of the burst unsubscribed", timeout: .seconds(60)) {
            try await cluster.stats().subscriptions.keys.filter { $0.hasPrefix("object:burst/") }.isEmpty
        }
    }
}
