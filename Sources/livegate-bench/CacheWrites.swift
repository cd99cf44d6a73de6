// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK

extension Bench {
    /// The engine's cache write for realtime events spread over many objects, in process: 10,000 objects of the
    /// load cloud's shape held, then their events stored as the engine stores a read's batch
    /// (``CacheStore/storeNow(_:)``, one transaction), `batch` events a transaction, each to the next object in
    /// turn, each with its object topic's checkpoint. CPU time of this thread per event (the writes run on it), the
    /// median of 20 runs: a fixed amount of work to compare builds with in one session, and the part of the
    /// many-updates row's per-update cost that is the cache's. The WAL is checkpointed beside the writer, as the
    /// engine has it (``CacheStore/runCheckpoints()``, on another thread: not counted). With `batch` 1 (and fewer
    /// events a run), what each transaction costs besides its rows: the engine's case when events come one at a time.
    func measureCacheWrites(batch: Int = 20, eventsPerRun: Int = 10_000) async throws {
        let objects = 10_000
        let directory = NSTemporaryDirectory() + "lgbench-cache-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cache, _) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor())
        defer { try? cache.close() }
        let checkpoints = Task { await cache.runCheckpoints() }
        defer { checkpoints.cancel() }
        let padding = String(repeating: "x", count: max(0, payloadBytes - 40))
        func event(_ index: Int, version: Int64) -> (entity: Entity, checkpoint: (topic: Topic, seq: Int64)?) {
            let id = "s\(index % objects)"
            let entity = Entity(
                collection: LoadCloud.collection,
                id: id,
                version: version,
                data: ["pad": .string(padding), "t": .integer(index)],
                createdAt: "2026-01-01T00:00:00.000Z",
                updatedAt: "2026-01-01T00:00:00.000Z"
            )
            return (entity, (.object(entity.key), Int64(index + 1)))
        }
        for start in stride(from: 0, to: objects, by: 500) {
            _ = try cache.storeNow((start..<start + 500).map { event($0, version: 1) })
        }
        // The events, made before the clock starts: 20 runs of 10,000, each run one more version of every object.
        var runs: [Double] = []
        var stored = 0
        for run in 0..<20 {
            let events = (0..<eventsPerRun).map { event($0, version: Int64(run + 2)) }
            let before = Self.threadCPUNanoseconds()
            for start in stride(from: 0, to: events.count, by: batch) {
                stored += try cache.storeNow(Array(events[start..<min(events.count, start + batch)])).count { $0 }
            }
            runs.append(Double(Self.threadCPUNanoseconds() - before) / 1e3 / Double(events.count))
        }
        runs.sort()
        say(
            "cache write of spread realtime events (\(objects) objects, \(batch) events a transaction): median "
                + "\(String(format: "%.2f", runs[runs.count / 2])) µs of CPU per event over \(runs.count) runs of \(eventsPerRun) (\(stored) stored)"
        )
    }

    /// This thread's CPU time (user and system), in nanoseconds.
    private static func threadCPUNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
