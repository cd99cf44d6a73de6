// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import Hummingbird
import NIOCore
import NIOPosix

extension Bench {
    /// Many objects, many updates: `objects` distinct objects with one token each (on 100 connections, pipelined),
    /// then `rate` updates/s from the load cloud for `seconds`, each to the next object in turn. Prints how many
    /// were delivered (a reader that falls behind may get a newer version instead of every one), the latency
    /// from the load cloud's send to the subscriber's read, and the daemon's CPU per update.
    func measureManyUpdates(directory: String, bin: String, objects: Int, rate: Int, seconds: Double) async throws {
        let cloud = LoadCloud(payloadBytes: payloadBytes)
        let port = Int.random(in: 20_000..<40_000)
        let publisherLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let cloudTask = Task { try await cloud.application(port: port, eventLoopGroup: publisherLoop).runService() }
        defer { cloudTask.cancel() }
        try await waitForTCP(port: port)
        let daemon = try await startDaemon(directory: directory + "/spread", cloudURL: "http://127.0.0.1:\(port)", bin: bin)
        defer { daemon.stop() }

        let connections = min(100, objects)
        let hello = #"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"bench","protocol":1}}"# + "\n"
        var pools: [SubscriberPool] = []
        var perConnection: [Int] = []
        for c in 0..<connections {
            let ids = Array(stride(from: c, to: objects, by: connections))
            var lines = hello
            for (k, id) in ids.enumerated() {
                lines += #"{"jsonrpc":"2.0","id":\#(k + 1),"method":"object.observe","params":{"collection":"bench","id":"s\#(id)"}}"# + "\n"
            }
            // Ready at its first fresh state; the other tokens' are counted below.
            pools.append(
                try await SubscriberPool.connect(count: 1, socketPath: daemon.socket, greeting: lines, readyMarker: #""dataStatus":"fresh""#)
            )
            perConnection.append(ids.count)
        }
        try await waitUntil("\(objects) tokens fresh", timeout: .seconds(120)) {
            zip(pools, perConnection).allSatisfy { $0.receptions[0].markers >= $1 }
        }
        let receptions = pools.map { $0.receptions[0] }
        for reception in receptions { reception.reset(recordLatencies: true) }
        say("many updates: \(objects) objects, one token each on \(connections) connections; \(rate) updates/s for \(seconds) s…")

        let cpuBefore = daemon.child.cpuSeconds
        let total = Int(Double(rate) * seconds)
        let sendSeconds = try await send(total, rate: rate) { sent in cloud.publish(id: "s\(sent % objects)") }
        // Settled: every update delivered, or nothing more for a second (the rest coalesced into newer versions).
        let delivered = try await settle(receptions, expected: total)
        let cpu = daemon.child.cpuSeconds - cpuBefore
        var latencies = receptions.flatMap(\.latencies)
        latencies.sort()
        let figures = [0.5, 0.99].map { milliseconds(atPercentile: $0, of: latencies) } + [Double(latencies.last ?? 0) / 1e6]
        say(
            "  sent at \(Int(Double(total) / sendSeconds))/s; delivered \(delivered) of \(total); "
                + "p50 / p99 / max \(figures.map { String(format: "%.2f", $0) }.joined(separator: " / ")) ms; "
                + "daemon CPU \(String(format: "%.1f", cpu * 1e6 / Double(total))) µs per update"
        )
        for pool in pools { await pool.close() }
    }
}
