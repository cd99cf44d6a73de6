// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// The engine in-process (LiveSDK against a real livegate-cloud on SQLite), and the cloud's own writes.
extension Bench {
    func measureEngineAndCloud(directory: String, bin: String) async throws {
        let (cloud, base, access) = try await startCloud(directory: directory, bin: bin)
        defer { cloud.stop() }

        try await measureCloudWrites("SQLite", base: base, access: access, cloud: cloud)
        try await measureEngine(base: base, directory: directory, token: access)
        try await measureResultIndex(base: base, directory: directory, token: access)
    }

    /// Windowed access by index to a large query result: the engine reads it from its cache, fetching it a
    /// page of 100 at a time as far as reads reach, and must not hold it in memory.
    private func measureResultIndex(base: String, directory: String, token: String) async throws {
        let items = resultItems
        guard items >= 100 else { return }  // `--result-items 0` skips it
        let seeding = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for n in stride(from: worker, to: items, by: 8) {
                        _ = try await httpJSON(
                            .PUT,
                            base + CloudPath.object(EntityKey(collection: "big", id: "b\(n)")),
                            #"{"data":{"rank":\#(n),"text":"item number \#(n) of the big result"}}"#,
                            token: token
                        )
                    }
                }
            }
            try await group.waitForAll()
        }
        say(
            "result index: \(items) objects written to the cloud in \(format(Double(DispatchTime.now().uptimeNanoseconds - seeding) / 1e9 * 1000)) ms"
        )

        var logger = Logger(label: "bench-index")
        logger.logLevel = .error
        let configuration = LiveSDKConfiguration(
            cloudURL: base,
            credentials: Credentials(username: "bench", password: "bench-password"),
            stateDirectory: directory + "/index-engine"
        )
        let engine = try LiveClient(configuration: configuration, logger: logger)
        let running = Task { await engine.run() }
        let query = CollectionQuery(collection: "big", sort: QuerySort(field: "rank"))
        let observation = await engine.collection(query, pageSize: 20).observe { _ in }
        guard try await observation.resultCount() == items else { throw BenchError("the result index counts a wrong number of objects") }
        let before = residentKiB()

        // A reader scrolling through the whole result, 20 at a time: every page is fetched into the cache.
        let sweep = DispatchTime.now().uptimeNanoseconds
        var seen = 0
        var peak = before
        for start in stride(from: 0, to: items, by: 20) {
            let window = try await observation.objects(in: start..<(start + 20))
            guard window.first?.id == "b\(start)" else { throw BenchError("index \(start) is \(window.first?.id ?? "missing")") }
            seen += window.count
            if start % 10_000 == 0 { peak = max(peak, residentKiB()) }
        }
        let sweepMs = Double(DispatchTime.now().uptimeNanoseconds - sweep) / 1e6
        peak = max(peak, residentKiB())
        let afterSweep = residentKiB()

        // Random windows, once the result is in the cache.
        var reads: [Double] = []
        for _ in 0..<2000 {
            let start = Int.random(in: 0..<(items - 20))
            let begin = DispatchTime.now().uptimeNanoseconds
            let window = try await observation.objects(in: start..<(start + 20))
            reads.append(Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e6)
            guard window.count == 20, window.first?.id == "b\(start)" else { throw BenchError("random window at \(start) is wrong") }
        }
        reads.sort()
        let cacheBytes = (try? FileManager.default.attributesOfItem(atPath: directory + "/index-engine/cache.sqlite")[.size] as? Int) ?? 0

        // For contrast: the same result held in memory.
        let all = try await observation.allObjects()
        let holding = residentKiB()
        say(
            "result index: \(seen) objects read by index, 20 at a time, in \(format(sweepMs)) ms (fetched into the cache as the reads went); "
                + "RSS \(before / 1024) MiB before, \(peak / 1024) MiB at most during, \(afterSweep / 1024) MiB after "
                + "(\((afterSweep - before) * 1024 / items) bytes per item); cache file \(cacheBytes / 1_048_576) MiB"
        )
        say(
            "result index: a random window of 20 of \(items): p50 \(format(reads[reads.count / 2])) ms, p99 \(format(reads[reads.count * 99 / 100])) ms; "
                + "for contrast, allObjects() holding all \(all.count) in memory: RSS \(holding / 1024) MiB (+\((holding - afterSweep) / 1024) MiB)"
        )
        observation.invalidate()
        running.cancel()
        await running.value
        await engine.close()
    }

    private func measureEngine(base: String, directory: String, token: String) async throws {
        var logger = Logger(label: "bench-engine")
        logger.logLevel = .error
        let objects = 200
        for n in 0..<objects {
            _ = try await httpJSON(
                .PUT,
                base + CloudPath.object(EntityKey(collection: "cached", id: "c\(n)")),
                #"{"data":{"n":\#(n)}}"#,
                token: token
            )
        }
        let configuration = LiveSDKConfiguration(
            cloudURL: base,
            credentials: Credentials(username: "bench", password: "bench-password"),
            stateDirectory: directory + "/engine"
        )
        // Fill the cache: a running engine observes every object once.
        do {
            let engine = try LiveClient(configuration: configuration, logger: logger)
            let running = Task { await engine.run() }
            let fresh = Counter()
            var tokens: [NotificationToken] = []
            for n in 0..<objects {
                tokens.append(await engine.object(collection: "cached", id: "c\(n)").observe { if $0.dataStatus == .fresh { fresh.add() } })
            }
            try await waitUntil("\(objects) objects fetched") { fresh.value >= objects }

            // Writes through the outbox: from the call to the cloud's confirmation.
            var writes: [Double] = []
            for n in 0..<300 {
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try await engine.write(collection: "cached", id: "c\(n % objects)", .merge(["w": .integer(n)]))
                writes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            writes.sort()
            say(
                "engine writes through the durable outbox (queued, sent, confirmed): p50 \(format(writes[writes.count / 2])) ms, "
                    + "p99 \(format(writes[writes.count * 99 / 100])) ms"
            )
            tokens.removeAll()
            running.cancel()
            await running.value
            await engine.close()
        }
        // A new engine on the same cache, not connected: the time from observe() to the first (local) snapshot.
        let engine = try LiveClient(configuration: configuration, logger: logger)
        var firstSnapshot: [Double] = []
        var keep: [NotificationToken] = []
        for n in 0..<objects {
            let delivered = Counter()
            let start = DispatchTime.now().uptimeNanoseconds
            keep.append(await engine.object(collection: "cached", id: "c\(n)").observe { if $0.dataStatus == .local { delivered.add() } })
            try await waitUntil("the cached snapshot") { delivered.value > 0 }
            firstSnapshot.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        firstSnapshot.sort()
        say(
            "engine: time to first snapshot of a cached object: p50 \(format(firstSnapshot[objects / 2])) ms, "
                + "p99 \(format(firstSnapshot[objects * 99 / 100])) ms (\(objects) objects)"
        )

        // Memory per observation token: many observers of one object in one engine.
        let count = 100_000
        let before = residentKiB()
        for _ in 0..<count { keep.append(await engine.object(collection: "cached", id: "c0").observe { _ in }) }
        let after = residentKiB()
        say(
            "engine: \(count) observation tokens of one object: \((after - before) * 1024 / count) bytes per token (RSS \(before / 1024) → \(after / 1024) MiB)"
        )
        keep.removeAll()
        await engine.close()
    }

    func format(_ milliseconds: Double) -> String { String(format: "%.2f", milliseconds) }

    /// The median of `values` and their range: `12.30 (10.10-15.00)`.
    func medianAndRange(_ values: [Double]) -> String { medianAndRange(values, as: format) }

    /// The same, each figure written by `text`.
    func medianAndRange(_ values: [Double], as text: (Double) -> String) -> String {
        let sorted = values.sorted()
        let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        return "\(text(median)) (\(text(sorted[0]))-\(text(sorted[sorted.count - 1])))"
    }

    private func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}

/// A thread-safe counter a handler increments.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
