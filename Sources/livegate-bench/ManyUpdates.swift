// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
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
        let cloudServer = try await cloud.serve(port: port, eventLoopGroup: publisherLoop)
        defer { cloudServer.close(promise: nil) }
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
        // Each topic subscribed from its read just after the token was told fresh; the load cloud replays nothing, so an
        // update sent before would be missed, and the next one a skip (a resync and a fetch, in the measured time).
        let ids = (0..<objects).map { "s\($0)" }
        try await waitUntil("the daemon subscribed to the \(objects) objects' topics", timeout: .seconds(120)) {
            cloud.subscribedCount(of: ids) == objects
        }
        say("many updates: \(objects) objects, one token each on \(connections) connections; \(rate) updates/s for \(seconds) s…")
        try await sendSpread(pools: pools, objects: objects, rate: rate, seconds: seconds, process: daemon.child, system: "livegated", cloud: cloud)
        for pool in pools { await pool.close() }
        guard !skipFloor else { return }

        // The routed forwarder floor on the same objects: the daemon gone first (the load cloud would send it
        // the same events), its clients on as many connections, each asking for the same objects' topics.
        daemon.stop()
        try await waitUntil("the daemon to leave the load cloud's topics") { cloud.subscriptions(of: "s0") == 0 }
        let works = spreadFloorWork.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        for work in works {
            let floor = try await startFloor(directory: directory + "/spread", port: port, routedObjects: objects, workMicroseconds: work)
            defer { floor.stop() }
            var floorPools: [SubscriberPool] = []
            for c in 0..<connections {
                let topics = stride(from: c, to: objects, by: connections).map { "object:bench/s\($0)\n" }.joined()
                floorPools.append(
                    try await SubscriberPool.connect(
                        count: 1,
                        socketPath: directory + "/spread/floor.sock",
                        greeting: topics + ".\n",
                        readyMarker: ForwarderFloor.readyMarker
                    )
                )
            }
            try await waitUntil("\(connections) floor connections ready") { floorPools.allSatisfy { $0.readyCount == 1 } }
            try await sendSpread(
                pools: floorPools,
                objects: objects,
                rate: rate,
                seconds: seconds,
                process: floor,
                system: work == 0 ? "forwarder floor" : "forwarder floor + \(work) µs an event",
                cloud: cloud
            )
            for pool in floorPools { await pool.close() }
            floor.stop()
            try await waitUntil("the floor to leave the load cloud's topics") { cloud.subscriptions(of: "s0") == 0 }
        }
    }

    /// `rate` updates/s for `seconds` over `objects`, each to the next in turn; prints what `pools`' connections
    /// received: how many, the latency from the load cloud's send to the read, and `process`'s CPU per update.
    private func sendSpread(
        pools: [SubscriberPool],
        objects: Int,
        rate: Int,
        seconds: Double,
        process: Child,
        system: String,
        cloud: LoadCloud
    ) async throws {
        let receptions = pools.map { $0.receptions[0] }
        for reception in receptions { reception.reset(recordLatencies: true, recordStamps: timeline) }
        let cpuBefore = process.cpuSeconds
        let benchBefore = Child.cpuSeconds(process: "self")
        let total = Int(Double(rate) * seconds)
        let sendSeconds = try await send(total, rate: rate) { sent in cloud.publish(id: "s\(sent % objects)") }
        // Settled: every update delivered, or nothing more for a second (the rest coalesced into newer versions).
        let delivered = try await settle(receptions, expected: total)
        let cpu = process.cpuSeconds - cpuBefore
        let benchCPU = Child.cpuSeconds(process: "self") - benchBefore
        if timeline { printTimeline(system, receptions, sentPerSubscriber: total / receptions.count) }
        var latencies = receptions.flatMap(\.latencies)
        latencies.sort()
        let figures = [0.5, 0.99].map { milliseconds(atPercentile: $0, of: latencies) } + [Double(latencies.last ?? 0) / 1e6]
        say(
            "  \(system): sent at \(Int(Double(total) / sendSeconds))/s; delivered \(delivered) of \(total); "
                + "p50 / p99 / max \(figures.map { String(format: "%.2f", $0) }.joined(separator: " / ")) ms; "
                + "\(system) CPU \(String(format: "%.1f", cpu * 1e6 / Double(total))) µs per update, "
                + "the benchmark's (load cloud and readers) \(String(format: "%.1f", benchCPU * 1e6 / Double(total)))"
        )
    }
}
