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
        guard !queriesOnly else { return }
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
            if !queriesOnly { try await measureSharedWrites(label, bases: [base, secondBase], access: access, clouds: [cloud, second]) }
        } else if !queriesOnly {
            try await measureCloudWrites(label, base: base, access: access, cloud: cloud)
        }
        if !queriesOnly {
            try await measureRealtime(label, writeBase: base, writeAccess: access, listenBase: listenBase, listenAccess: listenAccess)
        }
        // Last: the 100,000 objects and the indexes the queries make would weigh on the rows before.
        if !secondInstance, queryObjects > 0 { try await measureQueries(label, base: base, access: access, objects: queryObjects) }
    }

    /// Write latency (one client, one write after the other); the rate with 8 and with 64 writers at once, with
    /// the writes each store transaction took (group commit) and the CPU time the cloud (and this benchmark,
    /// its client, on the same cores) spent per write; and the latency of writes sent at half the 64-writer
    /// rate (an open loop: each write at its time, whether or not the ones before were answered).
    func measureCloudWrites(_ label: String, base: String, access: String, cloud: Child) async throws {
        let padding = String(repeating: "x", count: max(0, payloadBytes - 20))
        let log = LatencyLog()
        try await WriterThreads(1, base: base).run { _, connection in
            for n in 0..<1000 {
                let start = DispatchTime.now().uptimeNanoseconds
                try Self.put(
                    connection,
                    CloudPath.object(EntityKey(collection: "w", id: "o\(n % 50)")),
                    #"{"data":{"pad":"\#(padding)"}}"#,
                    token: access
                )
                log.values.withLock { $0.append(DispatchTime.now().uptimeNanoseconds - start) }
            }
        }
        let latencies = log.values.withLock { $0.sorted() }.map { Double($0) / 1e6 }
        say(
            "cloud (\(label)) writes, one client: p50 \(format(latencies[latencies.count / 2])) ms, p99 \(format(latencies[latencies.count * 99 / 100])) ms, "
                + "\(Int(1000 / (latencies.reduce(0, +) / 1000))) writes/s"
        )
        try await measureConcurrentWrites(label, base: base, access: access, cloud: cloud, padding: padding)
    }

    private func measureConcurrentWrites(
        _ label: String,
        base: String,
        access: String,
        cloud: Child,
        padding: String
    ) async throws {
        var fullRate = 0.0
        for clients in [8, 64] {
            let before = try await cloudStats(base)
            let (cloudCPU, ownCPU) = (cloud.cpuSeconds, Child.cpuSeconds(process: "self"))
            let seconds = try await concurrentWrites(
                bases: [base],
                access: access,
                clients: clients,
                perClient: 16_000 / clients,
                collection: "w"
            ) { _ in padding }
            let after = try await cloudStats(base)
            let perWrite = { (seconds: Double) in String(format: "%.0f", seconds * 1e6 / 16_000) }
            let (cloudPerWrite, ownPerWrite) = (perWrite(cloud.cpuSeconds - cloudCPU), perWrite(Child.cpuSeconds(process: "self") - ownCPU))
            fullRate = 16_000 / seconds
            let perTransaction = Double(after.objectWrites - before.objectWrites) / Double(max(1, after.writeTransactions - before.writeTransactions))
            say(
                "cloud (\(label)) writes, \(clients) clients at once: \(Int(fullRate)) writes/s, "
                    + "\(String(format: "%.1f", perTransaction)) writes per transaction, CPU µs a write: cloud \(cloudPerWrite), "
                    + "this benchmark \(ownPerWrite)"
            )
        }
        try await measureRequestFloor(label, base: base, access: access, cloud: cloud)
        let rate = pacedWriteRate ?? fullRate / 2
        let paced = try await pacedWrites(base: base, access: access, rate: rate, seconds: 4, writers: 64, padding: padding)
        say(
            "cloud (\(label)) writes at \(Int(rate))/s (\(pacedWriteRate == nil ? "half the 64-client rate" : "--paced-write-rate")): p50 \(format(paced.p50)) ms, p99 \(format(paced.p99)) ms "
                + "(\(paced.count) writes)"
        )
    }

    /// What any request costs before a store is involved: 64 clients at once, as the 64-writer row, each sending
    /// `GET /v1/stats` (the same headers as a write, no body, no store, an answer of a few hundred bytes) one after
    /// the other. Its rate and CPU a request bound what the write rows can reach on this machine.
    private func measureRequestFloor(_ label: String, base: String, access: String, cloud: Child) async throws {
        let requests = 16_000
        let clients = 64
        let (cloudCPU, ownCPU) = (cloud.cpuSeconds, Child.cpuSeconds(process: "self"))
        let threads = try WriterThreads(clients, base: base)
        let started = DispatchTime.now().uptimeNanoseconds
        try await threads.run { _, connection in
            for _ in 0..<(requests / clients) {
                let status = try connection.request("GET", CloudPath.stats, body: "", token: access)
                guard status == 200 else { throw BenchError("GET \(CloudPath.stats): HTTP \(status)") }
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let perRequest = { (seconds: Double) in String(format: "%.0f", seconds * 1e6 / Double(requests)) }
        say(
            "cloud (\(label)) requests with no store (GET /v1/stats), \(clients) clients at once: \(Int(Double(requests) / seconds)) requests/s, "
                + "CPU µs a request: cloud \(perRequest(cloud.cpuSeconds - cloudCPU)), this benchmark \(perRequest(Child.cpuSeconds(process: "self") - ownCPU))"
        )
    }

    /// Pages of a query over a collection of `objects` objects (written first, by 64 writers): sorted by a
    /// field (the first page makes its index), by a field with a filter, and by id; each page after the
    /// first follows the one before's cursor.
    private func measureQueries(_ label: String, base: String, access: String, objects: Int) async throws {
        let started = DispatchTime.now().uptimeNanoseconds
        let writers = 64
        try await WriterThreads(writers, base: base).run { w, connection in
            for n in stride(from: w, to: objects, by: writers) {
                try Self.put(
                    connection,
                    CloudPath.object(EntityKey(collection: "q", id: "q\(n)")),
                    #"{"data":{"group":"g\#(n % 3)","rank":\#((n * 7919) % 1000),"text":"object \#(n) of the query figures"}}"#,
                    token: access
                )
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        say("cloud (\(label)) query figures: \(objects) objects written in \(format(seconds)) s")
        let rows: [(what: String, parameters: String)] = [
            ("sorted by a field", "sort=-rank"),
            (
                "sorted by a field, filtered (a third match)",
                "sort=-rank&where=" + #"{"group":"g1"}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            ),
            ("by id", ""),
        ]
        for (what, parameters) in rows {
            var timings: [Double] = []
            var cursor: String?
            var count = 0
            for _ in 0..<201 {
                var url = base + CloudPath.objects("q") + "?limit=20"
                if !parameters.isEmpty { url += "&" + parameters }
                if let cursor { url += "&after=" + cursor }
                let start = DispatchTime.now().uptimeNanoseconds
                let body = try await httpJSON(.GET, url, "", token: access)
                timings.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                let page = try JSONDecoder().decode(QueryPage.self, from: body)
                count = page.count
                guard let next = page.nextCursor else { break }
                cursor = next
            }
            let first = timings.removeFirst()
            timings.sort()
            say(
                "cloud (\(label)) query, \(what), \(count) of \(objects) objects: first page \(format(first)) ms, the next \(timings.count) pages "
                    + "p50 \(format(timings[timings.count / 2])) ms, p99 \(format(timings[min(timings.count - 1, timings.count * 99 / 100)])) ms"
            )
        }
    }

    /// `clients` writers at once, each `perClient` writes to 20 objects of its own, each writer a thread with
    /// its own connection (``RawHTTPConnection``); returns the seconds taken.
    /// 64 writers at once, spread over instances sharing the database (each writer on one of them): the rate,
    /// and each instance's CPU time per write of all.
    private func measureSharedWrites(_ label: String, bases: [String], access: String, clouds: [Child]) async throws {
        let padding = String(repeating: "x", count: max(0, payloadBytes - 20))
        let cpuBefore = clouds.map(\.cpuSeconds)
        let seconds = try await concurrentWrites(bases: bases, access: access, clients: 64, perClient: 16_000 / 64, collection: "w2") { _ in padding }
        let perWrite = zip(clouds, cpuBefore).map { cloud, before in String(format: "%.0f", (cloud.cpuSeconds - before) * 1e6 / 16_000) }
        say(
            "cloud (\(label)) writes, 64 clients at once, spread over the \(bases.count): \(Int(16_000 / seconds)) writes/s, "
                + "CPU µs a write: clouds \(perWrite.joined(separator: " + "))"
        )
    }

    private func concurrentWrites(
        bases: [String],
        access: String,
        clients: Int,
        perClient: Int,
        collection: String,
        padding: @escaping @Sendable (Int) -> String
    ) async throws -> Double {
        let writers = try WriterThreads(clients, bases: bases)
        let started = DispatchTime.now().uptimeNanoseconds
        try await writers.run { c, connection in
            for n in 0..<perClient {
                try Self.put(
                    connection,
                    CloudPath.object(EntityKey(collection: collection, id: "c\(c)-\(n % 20)")),
                    #"{"data":{"pad":"\#(padding(n))","t":\#(DispatchTime.now().uptimeNanoseconds)}}"#,
                    token: access
                )
            }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
    }

    /// Writes sent at `rate` a second for `seconds` by `writers` writers in turn (an open loop: a write is
    /// sent at its time, not after the one before it was answered); the latency of each.
    private func pacedWrites(
        base: String,
        access: String,
        rate: Double,
        seconds: Double,
        writers: Int,
        padding: String
    ) async throws -> (p50: Double, p99: Double, count: Int) {
        let total = Int(rate * seconds)
        let interval = 1e9 / rate
        let latencies = LatencyLog()
        let threads = try WriterThreads(writers, base: base)
        let started = DispatchTime.now().uptimeNanoseconds
        try await threads.run { w, connection in
            for n in stride(from: w, to: total, by: writers) {
                let due = started + UInt64(Double(n) * interval)
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(useconds_t((due - now) / 1000)) }
                // From the time it was due: a write sent late because the one before it was slow counts that wait.
                try Self.put(
                    connection,
                    CloudPath.object(EntityKey(collection: "paced", id: "p\(w)-\(n % 20)")),
                    #"{"data":{"pad":"\#(padding)"}}"#,
                    token: access
                )
                latencies.values.withLock { $0.append(DispatchTime.now().uptimeNanoseconds - due) }
            }
        }
        let sorted = latencies.values.withLock { $0.sorted() }
        return (milliseconds(atPercentile: 0.50, of: sorted), milliseconds(atPercentile: 0.99, of: sorted), sorted.count)
    }

    private static func put(_ connection: RawHTTPConnection, _ path: String, _ body: String, token: String) throws {
        let status = try connection.request("PUT", path, body: body, token: token)
        guard (200..<300).contains(status) else { throw BenchError("PUT \(path): HTTP \(status)") }
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
            _ = try await concurrentWrites(bases: [writeBase], access: writeAccess, clients: 8, perClient: writes / 8, collection: collection) { _ in
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
                    if let t = decoded.entity?.data["t"]?.exactNumber?.uint64Value { record(t, now) }
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
