// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The engine's observed objects: one shared observation per key, and the reads under way.
package struct ObjectObservationsState {
    package var observations: [EntityKey: SharedObjectObservation] = [:]
    /// Objects being read now: one read per object at a time.
    var fetching: Set<EntityKey> = []
    /// Objects to read once more when their read under way ends (a refresh asked for meanwhile).
    var refetchWanted: Set<EntityKey> = []
    /// Objects whose subscription resumed from a checkpoint, until its replay is over.
    var awaitingCatchUp: Set<EntityKey> = []
}

// Observing objects: each key's shared observation, its activation (a read, or a resumption from the cache's
// checkpoint), its refreshes and its release.
extension LiveClient {
    func observe(_ key: EntityKey, options: ObserveOptions, handler: @escaping @Sendable (LiveObjectChange) -> Void) async
        -> NotificationToken
    {
        await observe([ObservationRequest(key: key, options: options, handler: handler)])[0]
    }

    /// Starts every observation of `requests`, in their order, and returns their tokens in the same order: as
    /// many ``LiveObject/observe(options:_:)`` calls would, in one hop to the engine. The objects not observed
    /// yet start together: what they start from (the cached copy, the topic's checkpoint, the queued writes) is
    /// read in one go, each is told it at once, and each is then read from the cloud or resumes its topic (see
    /// ``activate(_:)``). For a burst of new observations (the daemon's clients opening lists of thousands of
    /// items): one task for the burst rather than a task, a wait and a wake-up per object.
    public func observe(_ requests: [ObservationRequest]) async -> [NotificationToken] {
        var tokens: [NotificationToken] = []
        tokens.reserveCapacity(requests.count)
        var observed: [SharedObjectObservation] = []
        observed.reserveCapacity(requests.count)
        var new: [SharedObjectObservation] = []
        for request in requests {
            let key = request.key
            let observation: SharedObjectObservation
            if let existing = objects.observations[key] {
                observation = existing
                if request.activatesAtOnce { activateAtOnce([key]) }
            } else {
                observation = SharedObjectObservation(key: key)
                objects.observations[key] = observation
                new.append(observation)
                if request.activatesAtOnce { objectStarts.startBatch.activatingAtOnce.insert(key) }
            }
            let id = observation.add(options: request.options, handler: request.handler)
            tokens.append(
                NotificationToken { [commandSink] in
                    observation.remove(id)
                    commandSink.yield(.release(key))
                }
            )
            observed.append(observation)
        }
        if !new.isEmpty {
            var starts: [ObservationStart]?
            do {
                // With the other observations started at about the same time (a burst reads in one go).
                starts = try await batchedStarts(new.map(\.key))
            } catch {
                logger.error("cache read failed", metadata: ["keys": "\(new.count)", "error": "\(error)"])
            }
            var deferred: [SharedObjectObservation] = []
            for (index, observation) in new.enumerated() {
                let start = starts?[index]
                // On the observation, not in a table by key: a burst's 10,000 grew one and emptied it again.
                if let start { observation.keepStartCheckpoint(start.checkpoint) }
                observation.apply { state in
                    for entry in start?.pending ?? [] { _ = state.localWrite(entry.id, entry.write) }
                    return state.started(cached: start?.cached, fetching: true)
                }
                // One with nothing cached has nothing to tell before its read, and one whose observer waits for
                // fresh data waits for its read: those go out at once.
                let atOnce =
                    !objectStarts.startBatch.activatingAtOnce.isEmpty && objectStarts.startBatch.activatingAtOnce.remove(observation.key) != nil
                if start?.cached == nil || atOnce {
                    commandSink.yield(.activate(observation.key))
                } else {
                    deferred.append(observation)
                }
            }
            activateWhenTheBurstPauses(deferred)
        }
        for observation in observed where observation.isUnobserved { commandSink.yield(.release(observation.key)) }
        return tokens
    }

    /// Activates new observations: each reads its object, then subscribes its topic from the read (the cloud
    /// replays what changed since, so no change falls between; see ``RealtimeConnection/acquire(_:readAsOf:)``):
    /// a burst of new observations is thus read at once, in batches as large as the cloud takes, each
    /// subscription made after. When the cache holds a checkpoint for the topic (a previous run saw its events up
    /// to there), the subscription resumes from it instead: the cloud replays what was missed and no fetch is
    /// needed. A topic still held (it lingers after an observation just ended) is subscribed already: the fetch
    /// reads as of its last event.
    ///
    /// The resumptions run from this task (beyond ``RealtimeClientBatch/maximumRequests``, that many at a time in
    /// a child task each: one realtime message each, the next full while one is in flight), rather than a task
    /// apiece holding its frames until the cloud answers; the reads run a task each, as any fetch with its
    /// retries.
    func activate(_ keys: [EntityKey]) async {
        var candidates: [(observation: SharedObjectObservation, topic: Topic, checkpoint: Int64?)] = []
        for key in keys {
            guard let observation = objects.observations[key] else { continue }
            let topic = Topic.object(key)
            var checkpoint: Int64?
            if let read = observation.takeStartCheckpoint() {
                checkpoint = read  // read with the observation's start
            } else {
                do {
                    checkpoint = try await cache.checkpoint(topic)
                } catch {
                    logger.error("reading a checkpoint failed", metadata: ["key": "\(key)", "error": "\(error)"])
                }
            }
            candidates.append((observation, topic, checkpoint))
        }
        // One call for the batch: the fetches below then all start before any of them runs, and go out together.
        let unresumable = candidates.compactMap { $0.checkpoint == nil ? $0.topic : nil }
        let held = unresumable.isEmpty ? [] : await realtime.held(unresumable)
        await withDiscardingTaskGroup { group in
            // Their use, for eviction, recorded now rather than when their starts were read (in a burst's cached
            // answers): one write beside the reads, not an update in each start read.
            let used = candidates.map(\.observation.key)
            group.addTask { [cache, logger] in
                do {
                    try await cache.touch(used)
                } catch {
                    logger.error("recording the use of cached objects failed", metadata: ["keys": "\(used.count)", "error": "\(error)"])
                }
            }
            var resumptions: [Resumption] = []
            // Not one released meanwhile (observed anew, its key has an observation of its own, activated on its own).
            for (observation, topic, checkpoint) in candidates where objects.observations[observation.key] === observation {
                let key = observation.key
                // Not while an earlier observation's fetch of the object still runs (it was released and observed
                // anew): this one would only be told to fetch again after it, and its topic would never be subscribed.
                if checkpoint == nil, !held.contains(topic), !objects.fetching.contains(key) {
                    group.addTask { await self.refresh(key, subscribingFromTheRead: true) }
                    continue
                }
                if checkpoint != nil {
                    objects.awaitingCatchUp.insert(key)
                    observation.apply { state in
                        state.resumeStarted()
                        return nil
                    }
                }
                resumptions.append(Resumption(observation: observation, topic: topic, checkpoint: checkpoint))
            }
            guard resumptions.count > RealtimeClientBatch.maximumRequests else {
                await resume(resumptions)
                return
            }
            var start = 0
            while start < resumptions.count {
                let chunk = Array(resumptions[start..<min(start + RealtimeClientBatch.maximumRequests, resumptions.count)])
                start += chunk.count
                group.addTask { await self.resume(chunk) }
            }
        }
    }

    /// An observation being activated that subscribes its topic itself (resuming from `checkpoint`, or
    /// held already).
    private struct Resumption {
        let observation: SharedObjectObservation
        let topic: Topic
        let checkpoint: Int64?
    }

    /// Acquires the topics of observations being activated, resuming each from its checkpoint where there is one;
    /// an observation whose topic was not resumed (subscribed from the cloud's head, or refused) is read. Those
    /// released before their turn came (a chunk of a burst waits for the one before) take no reference: their
    /// release dropped none.
    private func resume(_ resumptions: [Resumption]) async {
        let current = resumptions.filter { objects.observations[$0.observation.key] === $0.observation }
        let outcomes = await realtime.acquire(current.map { ($0.topic, $0.checkpoint) })
        await withDiscardingTaskGroup { group in
            for (resumption, outcome) in zip(current, outcomes) {
                switch outcome {
                case .resumed:
                    continue  // caughtUp follows the replay
                case .subscribed, .refused:
                    let key = resumption.observation.key
                    if objects.awaitingCatchUp.removeShrinking(key) != nil { objects.observations[key]?.apply { $0.resumeAbandoned() } }
                    group.addTask { await self.refresh(key) }
                }
            }
        }
    }

    /// Fetches the object; on failure retries with backoff for as long as it is observed, so observers
    /// converge once the cloud answers again. One fetch per object at a time; a refresh asked for while
    /// one runs makes it fetch once more. `subscribingFromTheRead`: the topic is not subscribed yet, and the
    /// first successful read subscribes it from there (see ``activate(_:)``).
    func refresh(_ key: EntityKey, subscribingFromTheRead: Bool = false) async {
        guard let observation = objects.observations[key] else { return }
        guard !objects.fetching.contains(key) else {
            objects.refetchWanted.insert(key)
            return
        }
        objects.fetching.insert(key)
        defer { objects.fetching.removeShrinking(key) }
        var failures = 0
        var subscribeAfterRead = subscribingFromTheRead
        while objects.observations[key] === observation {
            objects.refetchWanted.removeShrinking(key)
            // `loading` once: a retry after a failure stays `error` until it succeeds, rather than telling
            // observers loading/error again at every attempt.
            if failures == 0 { observation.apply { $0.fetchStarted() } }
            do {
                // Every event up to the subscription's last seen sequence number is committed before the fetch
                // reads: the fetched state holds them all, so the cache can say so.
                let baseline = await realtime.lastSeq(of: .object(key))
                let checkpoint = baseline.map { (topic: Topic.object(key), seq: $0) }
                // Stored in the cache with its checkpoint by the fetch, with the rest of its batch.
                let (entity, readAt, storeFailure) = try await batchedFetch(key, checkpoint: checkpoint)
                if let storeFailure {
                    // The observers get what the cloud said all the same: a cache that cannot store (a full
                    // disk) costs the next start a fetch, not this observation its data.
                    logCacheFailure(storeFailure, ["key": "\(key)"])
                }
                observation.apply { $0.fetchSucceeded(entity) }
                readOutcome(key.collection, nil)
                cacheStored(1)
                failures = 0
                if subscribeAfterRead, objects.observations[key] === observation {
                    subscribeAfterRead = false
                    if !(await gatedSubscription({ await subscribe(observation, readAt: readAt) })) { objects.refetchWanted.insert(key) }
                }
                if !objects.refetchWanted.contains(key) { break }
            } catch {
                failures += 1
                logger.warning("fetch failed", metadata: ["key": "\(key)", "error": "\(error)", "attempt": "\(failures)"])
                observation.apply { $0.fetchFailed(error) }
                readOutcome(key.collection, error)
                // From about 400 ms up to 30 s; ends early when the engine stops (cancellation).
                do {
                    try await retryPause(after: failures)
                } catch {
                    break
                }
            }
        }
        if observation.isUnobserved { commandSink.yield(.release(key)) }
        // The observation was released and observed anew while this fetch ran (its answer went to the old
        // one): the new one asked for a fetch and was told one runs. It gets its own.
        if objects.observations[key] !== observation, objects.observations[key] != nil, objects.refetchWanted.remove(key) != nil {
            commandSink.yield(.refresh(key))
        }
    }

    /// Subscribes the topic of an object just read as of event `readAt`, from there: the cloud replays what
    /// changed since the read, and each change is told as it comes, like any later change: observers were told
    /// the read, so two writes landing between the read and the subscription are told both, never the second
    /// alone. A newer version a collection topic brings before the replay of an older one is a gap as any
    /// other: a resync notice, then the full state. Returns whether the read stands; `false` when it must
    /// be read again (the cloud could not resume from it, refused the subscription, or did not say what the
    /// read was as of).
    ///
    /// Nothing is subscribed for an observation released meanwhile (its turn at the subscription gate may come
    /// long after the read): its release dropped no reference, so one taken now would stay for ever.
    private func subscribe(_ observation: SharedObjectObservation, readAt: Int64?) async -> Bool {
        let key = observation.key
        guard objects.observations[key] === observation else { return true }
        let topic = Topic.object(key)
        guard let readAt else {
            _ = await realtime.acquire(topic, since: nil)
            return false
        }
        let outcome = await realtime.acquire(topic, readAsOf: readAt)
        switch outcome {
        case .resumed, .deferred: return true
        case .readAgain, .refused: return false
        }
    }

    /// Runs a cloud request with the session's access token; when the cloud rejects the token, once more
    /// with a renewed one.
    func withSession<T>(_ request: (String) async throws(LiveError) -> T) async throws(LiveError) -> T {
        let token = try await session.accessToken()
        do {
            return try await request(token)
        } catch  where error.code == .unauthenticated {
            await session.tokenRejected(token)
            return try await request(try await session.accessToken())
        }
    }

    func releaseIfUnobserved(_ key: EntityKey) async {
        guard let observation = objects.observations[key], observation.isUnobserved else { return }
        objects.observations[key] = nil
        objects.awaitingCatchUp.removeShrinking(key)
        askForEviction(.released)
        await realtime.release(.object(key))
    }
}
