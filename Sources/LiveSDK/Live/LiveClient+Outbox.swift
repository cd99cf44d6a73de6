// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging

/// The write outbox's state in the engine: who waits for which write, and the write being sent.
struct WriteOutboxState {
    var waiters: [Int64: CheckedContinuation<Entity, any Error>] = [:]
    /// Which write goes next, and what each outcome asks for.
    var sender = OutboxSender()
    /// Outcomes of writes whose writer was not waiting yet.
    var finished: [Int64: Result<Entity, any Error>] = [:]
    /// The object whose write is being sent, and the realtime changes of it that arrived meanwhile.
    var inFlight: EntityKey?
    var heldDuringWrite: [(seq: Int64, topic: Topic, entity: Entity, previous: JSONValue?)] = []
    /// Wakes the sender when a write is queued.
    let wake = OutboxWake()
}

/// Wakes the outbox's sender when a write is queued: at most one wake-up waits, however many writes came.
struct OutboxWake: Sendable {
    let wakes: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() { (wakes, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }

    func wake() { continuation.yield() }
}

/// Writes from this host: local first, then durably queued and sent in order.
///
/// A write is stored in the outbox (synced to disk) and shown to the object's observers at once, marked
/// ``LiveObjectChange/pendingWrites``. One sender sends the outbox in order, one write at a time, for as
/// long as the engine runs: through outages (retrying with backoff) and across restarts (what was queued
/// is sent when the engine runs again). Each write ends **confirmed** (the cloud's entity is stored in the
/// cache, then the write leaves the outbox; observers get the cloud's version) or **rejected** (a
/// version conflict, a permission, an invalid write: it leaves the outbox, observers get the state without
/// it and the error). Each write is applied once: it is sent under a write id kept with it in the outbox
/// (the cloud's `Idempotency-Key`), so a resend after a lost answer or a restart gets the first outcome.
extension LiveClient {
    /// Queues `change` and returns at once with its outbox id; the object's observers see it, pending,
    /// before this returns. ``write(collection:id:_:ifVersion:)`` also waits for the outcome.
    /// - Throws: ``LiveError`` `invalidArgument` (bad names, data that is not an object), a storage code
    ///   (`storageFull`, `storageReadOnly`, `storageIOError`: the write was not queued).
    @discardableResult
    public func enqueueWrite(collection: String, id: String, _ change: LiveWrite, ifVersion: Int64? = nil) async throws(LiveError)
        -> Int64
    {
        let key = try Self.checkedWrite(collection: collection, id: id, change)
        let outboxID = try await outbox.enqueue(key, change, ifVersion: ifVersion)
        objects.observations[key]?.apply { $0.localWrite(outboxID, change) }
        await pendingChanged(key)
        writeState.wake.wake()
        return outboxID
    }

    /// Performs `change` through the outbox and returns the stored entity once the cloud confirmed it (for
    /// a deletion, its tombstone). The cache and the object's observers have the result before this returns.
    /// - Parameter ifVersion: succeed only if the stored version is exactly this (0: must not exist yet).
    /// - Throws: ``LiveError``: the cloud's rejection (`versionConflict`, `notPermitted`, `notFound`,
    ///   `invalidArgument`), or `cloudUnavailable` if the engine stops first (the write stays queued).
    public func write(collection: String, id: String, _ change: LiveWrite, ifVersion: Int64? = nil) async throws(LiveError)
        -> Entity
    {
        let outboxID = try await enqueueWrite(collection: collection, id: id, change, ifVersion: ifVersion)
        do {
            return try await withCheckedThrowingContinuation { continuation in
                if let outcome = writeState.finished.removeValue(forKey: outboxID) {
                    continuation.resume(with: outcome)
                } else {
                    writeState.waiters[outboxID] = continuation
                }
            }
        } catch let error as LiveError {
            throw error
        } catch {
            throw LiveError(code: .cloudUnavailable, message: "\(error)")
        }
    }

    /// Writes `data` as the object's new content (creating it if needed); see ``write(collection:id:_:ifVersion:)``.
    public func write(collection: String, id: String, data: JSONValue, ifVersion: Int64? = nil) async throws(LiveError) -> Entity {
        try await write(collection: collection, id: id, .replace(data), ifVersion: ifVersion)
    }

    /// How many writes wait in the outbox.
    public func pendingWriteCount() async throws(LiveError) -> Int {
        try await outbox.entries().count { writeState.sender.isPending($0.id) }
    }

    /// Removes the writes that are done but could not be removed from the outbox (a full disk cannot even
    /// record a deletion); those that still fail wait for the next try.
    private func removeDoneWrites() async {
        for id in writeState.sender.doneButQueued.sorted() {
            do {
                try await outbox.remove(id)
                writeState.sender.removed(id)
            } catch {
                return
            }
        }
    }

    /// Sends the outbox, in order, until the task is cancelled (``OutboxSender`` decides; this does the I/O).
    func runOutbox() async {
        var signals = writeState.wake.wakes.makeAsyncIterator()
        sending: while !Task.isCancelled {
            if !writeState.sender.doneButQueued.isEmpty { await removeDoneWrites() }
            let entry: OutboxEntry?
            do {
                entry = try await outbox.next(after: writeState.sender.last)
            } catch {
                if Task.isCancelled { break }  // the engine stops
                logger.error("reading the outbox failed", metadata: ["error": "\(error)"])
                entry = nil
            }
            guard let entry else {
                if !writeState.sender.doneButQueued.isEmpty {
                    // Done writes still to remove: try again in a second (or at a new write).
                    do {
                        try await Task.sleep(for: .seconds(1))
                    } catch {
                        break
                    }
                    continue
                }
                // Nothing to send: wait for a new write (or the end).
                guard await signals.next() != nil else { break }
                continue
            }
            writeState.inFlight = entry.key
            let outcome: OutboxSender.Outcome
            do {
                outcome = .confirmed(
                    try await withSession { token throws(LiveError) in
                        try await send(entry.write, entry.key, ifVersion: entry.ifVersion, writeID: entry.writeID, token: token)
                    }
                )
            } catch {
                outcome = .failed(error)
            }
            // Whether the confirmed entity is the newest copy known: a write whose answer was lost and that was
            // sent again is confirmed late, after events of newer writes of the object.
            var newest = true
            for action in writeState.sender.sent(entry.id, outcome) {
                switch action {
                case .store(let entity):
                    // A cache that cannot store it only misses an entity the cloud has.
                    do {
                        newest = try await cache.store(entity)
                    } catch {
                        logCacheFailure(error, ["key": "\(entry.key)"])
                    }
                case .remove(let id):
                    do {
                        try await outbox.remove(id)
                        writeState.sender.removed(id)
                    } catch {
                        writeState.sender.removalFailed(id)
                        logger.debug("removing a finished write from the outbox failed", metadata: ["key": "\(entry.key)", "error": "\(error)"])
                    }
                case .confirm(let id, let entity):
                    objects.observations[entry.key]?.apply { $0.writeConfirmed(id, entity) }
                    // An older copy places nothing: a window a newer event moved the object out of never takes it back.
                    collectionsChanged(entity, placing: newest)
                    await pendingChanged(entry.key)
                    await releaseHeldChanges()
                    cacheStored(1)
                    finish(id, .success(entity))
                case .reject(let id, let error):
                    logger.notice("the cloud rejected a write", metadata: ["key": "\(entry.key)", "error": "\(error)"])
                    objects.observations[entry.key]?.apply { $0.writeRejected(id, error) }
                    await pendingChanged(entry.key)
                    await releaseHeldChanges()
                    finish(id, .failure(error))
                case .pause(let failures):
                    await releaseHeldChanges()
                    if case .unreachable(let error) = outcome {
                        logger.warning(
                            "the write could not be sent; it stays queued",
                            metadata: ["key": "\(entry.key)", "error": "\(error)", "attempt": "\(failures)"]
                        )
                    }
                    do {
                        try await retryPause(after: failures)
                    } catch {
                        break sending
                    }
                }
            }
        }
        // Whoever still waits learns that the write did not complete in this run.
        let waiting = writeState.waiters
        writeState.waiters.removeAll()
        for continuation in waiting.values {
            continuation.resume(
                throwing: LiveError(code: .cloudUnavailable, message: "the engine stopped before the cloud confirmed the write; it stays queued")
            )
        }
    }

    /// Shows the object's pending writes in the windows of its collection: the confirmed entity with the
    /// outbox's writes of it applied, at its sorted place (or nothing more pending).
    private func pendingChanged(_ key: EntityKey) async {
        guard collectionWindows.observations.keys.contains(where: { $0.query.collection == key.collection }) else { return }
        let overlay: Entity??
        do {
            overlay = try await pendingOverlay(key, writes: try await outbox.entries(of: key).filter { writeState.sender.isPending($0.id) })
        } catch {
            logger.error("reading pending writes failed", metadata: ["key": "\(key)", "error": "\(error)"])
            return
        }
        for (window, observation) in collectionWindows.observations where window.query.collection == key.collection {
            observation.apply { $0.pendingChanged(key.id, overlay) }
        }
    }

    /// The object as its pending `writes` make it, over its confirmed state (`.some(nil)`: deleted), or
    /// `nil` when none is pending.
    private func pendingOverlay(_ key: EntityKey, writes: [OutboxEntry]) async throws -> Entity?? {
        guard !writes.isEmpty else { return nil }
        let stored = try await cache.entity(key)
        let base = stored?.deleted == true ? nil : stored
        return .some(writes.reduce(base) { $1.write.applied(to: $0, key: key, confirmedVersion: stored?.version ?? 0) })
    }

    /// Every pending write of the collection, as the overlay of its object (for a window that opens while
    /// writes wait in the outbox: it shows them from its first state).
    func pendingOverlays(in collection: String) async -> [(id: String, overlay: Entity?)] {
        do {
            let writes = try await outbox.entries().filter { $0.key.collection == collection && writeState.sender.isPending($0.id) }
            var overlays: [(id: String, overlay: Entity?)] = []
            for (key, ofKey) in Dictionary(grouping: writes, by: \.key).sorted(by: { $0.key.id < $1.key.id }) {
                if let overlay = try await pendingOverlay(key, writes: ofKey) { overlays.append((key.id, overlay)) }
            }
            return overlays
        } catch {
            logger.error("reading pending writes failed", metadata: ["collection": "\(collection)", "error": "\(error)"])
            return []
        }
    }

    /// The write's outcome is applied: the realtime changes held meanwhile go through now, in order (and
    /// those arriving while they do are held and applied after them).
    private func releaseHeldChanges() async {
        while !writeState.heldDuringWrite.isEmpty {
            let held = writeState.heldDuringWrite.removeFirst()
            await applyRemoteChange(held.entity, seq: held.seq, topic: held.topic, previous: held.previous)
        }
        writeState.inFlight = nil
    }

    private func finish(_ outboxID: Int64, _ outcome: Result<Entity, LiveError>) {
        let result = outcome.mapError { $0 as any Error }
        if let waiter = writeState.waiters.removeValue(forKey: outboxID) {
            waiter.resume(with: result)
        } else if writeState.finished.count < 1024 {
            // The writer has not started waiting yet (it is between enqueueing and waiting).
            writeState.finished[outboxID] = result
        }
    }

    /// Sends one queued write under its write id (the cloud's `Idempotency-Key`): when an earlier attempt
    /// was applied but its answer lost, the cloud answers with that attempt's outcome instead of applying
    /// the write again, so every write is applied once.
    private func send(_ change: LiveWrite, _ key: EntityKey, ifVersion: Int64?, writeID: String?, token: String) async throws(LiveError) -> Entity {
        switch change {
        case .replace(let data): try await cloud.put(key, PutObjectRequest(data: data, ifVersion: ifVersion), writeID: writeID, token: token)
        case .merge(let patch): try await cloud.patch(key, PutObjectRequest(data: patch, ifVersion: ifVersion), writeID: writeID, token: token)
        case .delete: try await cloud.delete(key, ifVersion: ifVersion, writeID: writeID, token: token)
        }
    }

    private static func checkedWrite(collection: String, id: String, _ change: LiveWrite) throws(LiveError) -> EntityKey {
        guard EntityKey.isValidName(collection), EntityKey.isValidName(id) else {
            throw LiveError(
                code: .invalidArgument,
                message: "collection and id must be 1-128 characters of A-Z a-z 0-9 _ - . (got \"\(collection)\", \"\(id)\")"
            )
        }
        switch change {
        case .replace(let data), .merge(let data):
            guard data.isObject else { throw LiveError(code: .invalidArgument, message: "an object's data must be a JSON object") }
        case .delete:
            break
        }
        return EntityKey(collection: collection, id: id)
    }
}
