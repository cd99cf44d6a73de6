// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Who is told of the realtime connection's status, by id.
struct ConnectionWatch {
    var status: ConnectionStatus = .offline
    var observers: [Int: @Sendable (ConnectionStatus) -> Void] = [:]
    var nextID = 0
    /// Retries waiting out their backoff: each ends early when the connection is made again.
    var retryPauses = RetryPausing()
}

// The realtime connection's events, in order: into the cache first, then to the observers and the windows.
extension LiveClient {
    /// Handles the realtime connection's events in order, a batch at a time (everything that arrived while the
    /// engine was busy: see ``BatchQueue``).
    func handleRealtimeEvents() async {
        while let batch = await realtime.events.next() { await handle(batch) }
    }

    /// A batch of events, in order. Each run of changes to entities goes to the cache in one transaction before
    /// any of them reaches an observer (the cache is never older than what was told), then to the observers in
    /// order, as ``handle(_:)-(RealtimeEvent)`` does each.
    func handle(_ batch: [RealtimeEvent]) async {
        var start = 0
        while start < batch.count {
            var end = start
            while end < batch.count, case .entityChanged = batch[end] { end += 1 }
            if end - start > 1 {
                await applyRemoteChanges(batch[start..<end])
                start = end
            } else {
                await handle(batch[start])
                start += 1
            }
        }
    }

    /// ``handle(_:)-(RealtimeEvent)`` for a run of `entityChanged` events: one cache transaction for those not
    /// held for a write, then each in order, with nothing awaited in between (no write can start meanwhile,
    /// so what is held is decided once), and eviction counted once.
    private func applyRemoteChanges(_ run: ArraySlice<RealtimeEvent>) async {
        var changes: [(seq: Int64, topic: Topic, entity: Entity, previous: JSONValue?)] = []
        changes.reserveCapacity(run.count)
        for event in run {
            guard case .entityChanged(let seq, let topic, let entity, let previous) = event else { continue }
            changes.append((seq, topic, entity, previous))
        }
        let held = changes.map { writeState.inFlight == $0.entity.key }
        var stores: [(entity: Entity, checkpoint: (topic: Topic, seq: Int64)?)] = []
        stores.reserveCapacity(changes.count)
        for (change, isHeld) in zip(changes, held) where !isHeld {
            stores.append((change.entity, Self.checkpoint(change.topic, change.seq)))
        }
        var newest = [Bool](repeating: true, count: stores.count)
        do {
            newest = try cache.storeNow(stores)
        } catch {
            logCacheFailure(error, ["objects": "\(stores.count)"])
        }
        var stored = 0
        for (change, isHeld) in zip(changes, held) {
            if case .collection = change.topic { feedEvent(change.topic, .next(change.entity, seq: change.seq)) }
            if isHeld {
                writeState.heldDuringWrite.append(change)
                continue
            }
            remoteChangeStored(change.entity, seq: change.seq, topic: change.topic, previous: change.previous, newest: newest[stored])
            stored += 1
        }
        cacheStored(stored, fromRealtime: true)
    }

    func handle(_ event: RealtimeEvent) async {
        switch event {
        case .statusChanged(let status):
            guard status != connectionWatch.status else { return }
            connectionWatch.status = status
            for observer in connectionWatch.observers.values { observer(status) }
            feedStatusChanged(status)
        case .connected(let needRefresh, let refused):
            forgetReadability()
            endRetryPauses()
            feedsConnected(needRefresh: needRefresh, refused: refused)
            // Resumed topics had their missed events replayed. The others cannot prove they saw every change:
            // their observers get a resync notice at once, and the full state once fetched.
            for topic in needRefresh {
                if case .collection(let collection) = topic {
                    resyncCollections(of: collection)
                    continue
                }
                if case .stream = topic {
                    // Messages are not state: what was missed cannot be fetched again. Say so (a refused
                    // topic's listeners were told of the refusal instead).
                    if !refused.contains(topic) { streamEvent(topic, .resync) }
                    continue
                }
                guard case .object(let key) = topic, let observation = objects.observations[key] else { continue }
                logger.notice("resync: continuity with the cloud could not be proven", metadata: ["key": "\(key)"])
                observation.apply { $0.resyncStarted() }
                commandSink.yield(.refresh(key))
            }
        case .streamMessage(let seq, let topic, let message):
            streamEvent(topic, .message(message, seq: seq))
        case .subscriptionRefused(let topic, let code, let message):
            if case .collection = topic { feedEvent(topic, .error(LiveError(subscriptionRefusal: code, message: message, topic: topic))) }
            if case .stream = topic { streamEvent(topic, .error(LiveError(subscriptionRefusal: code, message: message, topic: topic))) }
        case .entityChanged(let seq, let topic, let entity, let previous):
            if case .collection = topic { feedEvent(topic, .next(entity, seq: seq)) }
            if writeState.inFlight == entity.key {
                // Most likely the echo of the write being sent: held until the cloud's answer is applied, so
                // observers see pending → confirmed whatever order the answer and the event arrive in.
                writeState.heldDuringWrite.append((seq, topic, entity, previous))
                return
            }
            await applyRemoteChange(entity, seq: seq, topic: topic, previous: previous)
        case .caughtUp(let topic):
            if case .collection(let collection) = topic { await collectionsCaughtUp(collection) }
            guard case .object(let key) = topic, objects.awaitingCatchUp.removeShrinking(key) != nil else { return }
            objects.observations[key]?.apply { $0.caughtUp() }
        }
    }

    /// A change made elsewhere: into the cache (with the checkpoint of its object topic: the event carries the
    /// whole entity, so the cache is then as of that event), then to the object's observers and the windows.
    ///
    /// A collection topic's events (each heard once, in order, with the object's data before the write) also
    /// count whether the object joined or left each window's query, beyond the window too.
    func applyRemoteChange(_ entity: Entity, seq: Int64, topic: Topic, previous: JSONValue?) async {
        // Whether this is the newest copy of the object seen: the same write arrives on its object topic and
        // on its collection topic, and after a reconnection one topic may replay older events while the other
        // is already live. An older copy places nothing in a window (it would show an item that went back).
        var newest = true
        do {
            newest = try cache.storeNow(entity, checkpoint: Self.checkpoint(topic, seq))
        } catch {
            logCacheFailure(error, ["key": "\(entity.key)"])
        }
        remoteChangeStored(entity, seq: seq, topic: topic, previous: previous, newest: newest)
        cacheStored(1, fromRealtime: true)
    }

    /// The rest of ``applyRemoteChange(_:seq:topic:previous:)`` once the entity is in the cache: `newest` says
    /// whether it is the newest copy the cache knows.
    private func remoteChangeStored(_ entity: Entity, seq: Int64, topic: Topic, previous: JSONValue?, newest: Bool) {
        if let observation = objects.observations[entity.key], observation.skipsVersions(entity) {
            // Events of the object were missed: said before the newer version, then fetched as after a resync.
            logger.notice(
                "resync: an event skipped versions of an observed object",
                metadata: ["key": "\(entity.key)", "version": "\(entity.version)"]
            )
            observation.apply { $0.resyncStarted() }
            commandSink.yield(.refresh(entity.key))
        }
        objects.observations[entity.key]?.apply { $0.remoteChanged(entity) }
        if case .collection(let collection) = topic {
            collectionsChanged(entity, previous: .some(previous), placing: newest, seq: seq)
            collectionWindows.eventApplied[collection] = seq
        } else if newest {
            collectionsChanged(entity, seq: seq)
        }
    }

    /// The checkpoint an event's entity is stored with: its object topic's, at every event (it goes in the object's
    /// row, which the event writes anyway: ``CacheStore/upsert(_:topicSeq:in:)``). A collection topic's events
    /// are checkpointed with their windows instead.
    private static func checkpoint(_ topic: Topic, _ seq: Int64) -> (topic: Topic, seq: Int64)? {
        guard case .object = topic else { return nil }
        return (topic, seq)
    }
}
