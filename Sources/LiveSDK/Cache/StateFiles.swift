// Licensed under the Apache License, Version 2.0.

import Foundation

/// The engine's files in its state directory: the cache, the outbox, the monitor of how they fare, and what
/// opening them found.
struct StateFiles: Sendable {
    let cache: CacheStore
    /// The acknowledged writes waiting for the cloud, in a file of their own.
    let outbox: OutboxStore
    let monitor: StorageMonitor
    let startReport: StateFilesStartReport

    /// Opens (or makes) the files in `directory`. A damaged cache is moved aside and started anew; a damaged
    /// outbox is salvaged; writes an older version queued in the cache move to the outbox.
    static func open(directory: String) throws -> StateFiles {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let monitor = StorageMonitor()
        let (cache, cacheRecovery) = try CacheStore.open(path: directory + "/cache.sqlite", monitor: monitor)
        let (outbox, outboxSalvage) = try OutboxStore.open(path: directory + "/outbox.sqlite", monitor: monitor)
        // First added to the outbox, then removed from the cache: a crash in between leaves them in both, and
        // the write ids skip the copies.
        let legacy = try cache.legacyOutbox()
        let adopted = try outbox.adopt(legacy)
        if let last = legacy.last { try cache.clearLegacyOutbox(upTo: last.id) }
        return StateFiles(
            cache: cache,
            outbox: outbox,
            monitor: monitor,
            startReport: StateFilesStartReport(cacheRecovery: cacheRecovery, outboxSalvage: outboxSalvage, adoptedWrites: adopted)
        )
    }
}

/// What opening the state directory's files found: what the daemon logs once at start.
public struct StateFilesStartReport: Sendable, Equatable {
    /// The damaged cache found and moved aside, if there was one.
    public let cacheRecovery: CacheRecovery?
    /// The damaged outbox found and salvaged, if there was one.
    public let outboxSalvage: OutboxSalvage?
    /// How many queued writes moved from the cache (where earlier versions kept them) into the outbox.
    public let adoptedWrites: Int
}
