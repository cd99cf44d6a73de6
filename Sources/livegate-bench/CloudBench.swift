// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import HTTPTypes
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import WSClient

/// livegate-cloud alone, on SQLite and on PostgreSQL: write latency and rate, and realtime events
/// delivered per second with the latency from the REST write to the subscriber's read.
extension Bench {
    func measureClouds(directory: String, bin: String) async throws {
        try await measureCloud("SQLite", storage: ["--database", directory + "/cloud.sqlite"], directory: directory + "/sqlite", bin: bin)
        guard let postgres else {
            say("cloud on PostgreSQL: skipped (give --postgres URL, or run scripts/bench-cloud, which starts a private server)")
            return
        }
        try await measureCloud("PostgreSQL", storage: ["--postgres", postgres], directory: directory + "/postgres", bin: bin)
        // Two instances sharing the database: writes to one, subscribers on the other.
        try await measureCloud(
            "PostgreSQL, 2 instances",
            storage: ["--postgres", postgres],
            directory: directory + "/postgres2",
            bin: bin,
            secondInstance: true
        )
    }

    private func measureCloud(_ label: String, storage: [String], directory: String, bin: String, secondInstance: Bool = false) async throws {
        let (cloud, base, access) = try await startCloud(directory: directory, bin: bin, storage: storage)
        defer { cloud.stop() }
        var listenBase = base
        var listenAccess = access
        var other: Child?
        defer { other?.stop() }
        if secondInstance {
            let (second, secondBase, secondAccess) = try await startCloud(directory: directory + "/second", bin: bin, storage: storage)
            (other, listenBase, listenAccess) = (second, secondBase, secondAccess)
        } else {
            try await measureCloudWrites(label, base: base, access: access)
        }
        try await measureRealtime(label, writeBase: base, writeAccess: access, listenBase: listenBase, listenAccess: listenAccess)
    }

    /// Write latency (one client, one write after the other) and rate (one client, then 8 at once).
    func measureCloudWrites(_ label: String, base: String, access: String) async throws {
        var latencies: [Double] = []
        let padding = String(repeating: "x", count: max(0, payloadBytes - 20))
        for n in 0..<1000 {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try await httpJSON(
                .PUT,
                base + CloudPath.object(EntityKey(collection: "w", id: "o\(n % 50)")),
                #"{"data":{"pad":"\#(padding)"}}"#,
                token: access
            )
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        latencies.sort()
        say(
            "cloud (\(label)) writes, one client: p50 \(format(latencies[latencies.count / 2])) ms, p99 \(format(latencies[latencies.count * 99 / 100])) ms, "
                + "\(Int(1000 / (latencies.reduce(0, +) / 1000))) writes/s"
        )
        let seconds = try await concurrentWrites(base: base, access: access, clients: 8, perClient: 250, collection: "w") { _ in padding }
        say("cloud (\(label)) writes, 8 clients at once: \(Int(Double(8 * 250) / seconds)) writes/s")
    }

    /// `clients` writers at once, each `perClient` writes to 20 objects of its own; returns the seconds taken.
    private func concurrentWrites(
        base: String,
        access: String,
        clients: Int,
        perClient: Int,
        collection: String,
        padding: @escaping @Sendable (Int) -> String
    ) async throws -> Double {
        let started = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in 0..<clients {
                group.addTask {
                    for n in 0..<perClient {
                        _ = try await httpJSON(
                            .PUT,
                            base + CloudPath.object(EntityKey(collection: collection, id: "c\(c)-\(n % 20)")),
                            #"{"data":{"pad":"\#(padding(n))","t":\#(DispatchTime.now().uptimeNanoseconds)}}"#,
                            token: access
                        )
                    }
                }
            }
            try await group.waitForAll()
        }
        return Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
    }

    /// 10 realtime subscribers of one collection (on `listenBase`), 8 writers (on `writeBase`) making 2,000
    /// writes to it as fast as they can: events delivered per second, and the latency from the start of the
    /// REST write to the subscriber reading its event.
    private func measureRealtime(_ label: String, writeBase: String, writeAccess: String, listenBase: String, listenAccess: String) async throws {
        let subscribers = 10
        let writes = 2000
        let collection = "rt"
        let latencies = LatencyLog()
        let (ready, readySink) = AsyncStream.makeStream(of: Void.self)
        let padding = String(repeating: "x", count: max(0, payloadBytes - 40))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<subscribers {
                group.addTask {
                    try await Self.listen(
                        base: listenBase,
                        token: listenAccess,
                        topic: .collection(collection),
                        events: writes,
                        ready: readySink
                    ) { sentAt, now in latencies.values.withLock { $0.append(now - sentAt) } }
                }
            }
            var subscribed = ready.makeAsyncIterator()
            for _ in 0..<subscribers { _ = await subscribed.next() }
            let started = DispatchTime.now().uptimeNanoseconds
            _ = try await concurrentWrites(base: writeBase, access: writeAccess, clients: 8, perClient: writes / 8, collection: collection) { _ in
                padding
            }
            try await group.waitForAll()
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            let sorted = latencies.values.withLock { $0.sorted() }
            say(
                "cloud (\(label)) realtime: \(subscribers) subscribers × \(writes) writes from 8 clients: "
                    + "\(Int(Double(subscribers * writes) / seconds)) events delivered/s; write → event p50 "
                    + "\(format(milliseconds(atPercentile: 0.50, of: sorted))) ms, p99 \(format(milliseconds(atPercentile: 0.99, of: sorted))) ms"
            )
        }
    }

    /// One realtime subscriber: subscribes, says so on `ready`, and reads `events` events, reporting each
    /// one's write time (its data's `t`) and the time it was read.
    private static func listen(
        base: String,
        token: String,
        topic: Topic,
        events: Int,
        ready: AsyncStream<Void>.Continuation,
        record: @escaping @Sendable (_ sentAt: UInt64, _ now: UInt64) -> Void
    ) async throws {
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 24)
        configuration.additionalHeaders[.authorization] = "Bearer \(token)"
        let url = base.replacingOccurrences(of: "http://", with: "ws://") + CloudPath.realtime
        var logger = Logger(label: "bench-realtime")
        logger.logLevel = .error
        try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            let subscribe = RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic)
            try await outbound.write(.text(String(decoding: try JSONEncoder().encode(subscribe), as: UTF8.self)))
            var received = 0
            let decoder = JSONDecoder()
            for try await message in inbound.messages(maxSize: 1 << 24) {
                guard case .text(let text) = message else { continue }
                let now = DispatchTime.now().uptimeNanoseconds
                let decoded = try decoder.decode(RealtimeServerMessage.self, from: Data(text.utf8))
                switch decoded.op {
                case .ack: ready.yield()
                case .event:
                    if case .number(let t) = decoded.entity?.data["t"] { record(UInt64(t), now) }
                    received += 1
                    if received == events { return }
                default: throw BenchError("realtime: unexpected \(text)")
                }
            }
            throw BenchError("realtime: the connection closed after \(received) of \(events) events")
        }
    }
}

/// Latencies recorded by several subscribers at once, in nanoseconds.
final class LatencyLog: Sendable {
    let values = Mutex<[UInt64]>([])
}
