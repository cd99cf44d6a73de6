// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// What the engine needs to run.
public struct LiveSDKConfiguration: Sendable {
    /// The cloud's base URL, e.g. `http://127.0.0.1:8080`.
    public var cloudURL: String
    public var credentials: Credentials
    /// Where the cache lives (`cache.sqlite` is created there).
    public var stateDirectory: String
    /// At most this many entities stay in the cache; beyond, those no one observes are evicted, least
    /// recently used first. `nil`: no bound.
    public var cacheMaxEntities: Int?
    /// How long a realtime topic stays subscribed after its last observer went (a new observer meanwhile
    /// takes it over with no gap, no new subscription and no refetch).
    public var topicLinger: Duration
    /// The engine runs on one loop of this group (see ``EngineLoop``): the realtime connection's socket, the
    /// engine's actors and the cache write of each realtime event, which blocks the loop for its duration
    /// (tens of µs). A process that keeps its event loops busy with other sockets (the daemon, writing to
    /// its clients) gives the engine a loop of its own, so that cloud events are handled as they arrive
    /// rather than after that work.
    public var eventLoopGroup: any EventLoopGroup
    /// New observations told their cached copy in a burst (a list of thousands opened at once) are read from the
    /// cloud, or resume their topics, once none was told one for this long: until then the engine answers the
    /// burst's cached copies. One on its own is read at once, and so is one whose observer waits for fresh data
    /// (``ObservationRequest/activatesAtOnce``).
    public var activationPause: Duration
    /// However long a burst goes on, none of its observations waits longer than about this to be read.
    public var activationLongestWait: Duration
    /// How often the realtime connection asks the cloud whether it is still there (a WebSocket ping). A ping
    /// not answered by the next one gives the connection up (reconnecting, and resuming its topics): a cloud
    /// that went silent without closing (a network partition, a host gone, a hung process) is noticed within
    /// twice this, instead of the engine believing itself connected while it hears nothing.
    public var realtimePingInterval: Duration
    /// ``realtimePingInterval``'s default: a silent cloud is noticed within 30 s.
    public static let defaultRealtimePingInterval: Duration = .seconds(15)

    public init(
        cloudURL: String,
        credentials: Credentials,
        stateDirectory: String,
        cacheMaxEntities: Int? = nil,
        topicLinger: Duration = .seconds(2),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        activationPause: Duration = .milliseconds(10),
        activationLongestWait: Duration = .milliseconds(250),
        realtimePingInterval: Duration = LiveSDKConfiguration.defaultRealtimePingInterval
    ) {
        self.cloudURL = cloudURL
        self.credentials = credentials
        self.stateDirectory = stateDirectory
        self.cacheMaxEntities = cacheMaxEntities
        self.topicLinger = topicLinger
        self.eventLoopGroup = eventLoopGroup
        self.activationPause = activationPause
        self.activationLongestWait = activationLongestWait
        self.realtimePingInterval = realtimePingInterval
    }
}

/// The engine: one cloud session, one cache, one realtime connection, and the live objects served from them.
///
/// ```swift
/// let client = try LiveClient(configuration: config, logger: logger)
/// async let running: Void = client.run()
/// let token = await client.object(collection: "notes", id: "n1").observe { change in
///     print(change.dataStatus, change.snapshot?.data ?? "none")
/// }
/// ```
///
/// ``run()`` must be running for observations to fetch and to receive realtime changes; until it runs,
/// observers get what the cache holds.
public actor LiveClient {
    public nonisolated let session: Session
    public nonisolated let logger: Logger
    package let cache: CacheStore
    /// The acknowledged writes waiting for the cloud, in a file of their own.
    let outbox: OutboxStore
    /// How the state directory's files fare (see ``addStorageObserver(_:)``).
    let storage: StorageMonitor
    /// The damaged cache this engine found at start and moved aside, if it did.
    public nonisolated let cacheRecovery: CacheRecovery?
    /// The damaged outbox this engine found at start and salvaged, if it did.
    public nonisolated let outboxSalvage: OutboxSalvage?
    /// How many queued writes this engine moved at start from the cache (where earlier versions kept them)
    /// into the outbox.
    public nonisolated let adoptedWrites: Int
    let cloud: CloudClient
    package let realtime: RealtimeConnection
    /// The loop the engine runs on (see ``EngineLoop``).
    let engineLoop: EngineLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { engineLoop.serialExecutor }
    private let realtimeEvents: BatchQueue<RealtimeEvent>
    /// What the engine's loop is asked to do (``Command``), taken a batch at a time by ``runOnEngineLoop()``.
    let commandSink = BatchQueue<Command>()
    /// Batched object reads (LiveClient+BatchedFetch.swift).
    package var fetchBatches = FetchBatches()
    /// Batched observation starts (LiveClient+BatchedStart.swift).
    var startBatch = StartBatch()
    /// Collection windows: one record of each kind per window (LiveClient+Collections.swift).
    var collectionWindows = CollectionWindowsState()
    /// Retries waiting out their backoff (LiveClient+Retry.swift).
    var retryPausing = RetryPausing()
    /// What the cloud lets the session's user read (LiveClient+Permissions.swift).
    var permissions = CollectionPermissions()
    /// Stream and feed listeners (LiveClient+Streams.swift, LiveClient+Feeds.swift).
    var streamTable = ListenerTable<StreamListener>()
    var feedTable = ListenerTable<FeedListener>()
    /// The write outbox's waiters and the write in flight (LiveClient+Outbox.swift).
    var writeState = WriteOutboxState()
    package var observations: [EntityKey: SharedObjectObservation] = [:]
    private var fetching: Set<EntityKey> = []
    private var refetchWanted: Set<EntityKey> = []
    /// Observations told a cached copy, waiting for their activation (see ``activateWhenTheBurstPauses(_:)``).
    var activationDeferral: ActivationDeferral<SharedObjectObservation>
    /// New observations' subscriptions at once (see LiveClient+SubscriptionGate.swift).
    package var subscriptionGate = SubscriptionGate()
    public private(set) var connectionStatus: ConnectionStatus = .offline
    private var connectionObservers: [Int: @Sendable (ConnectionStatus) -> Void] = [:]
    private var nextConnectionObserver = 0
    /// ``permissions.readable`` as of its last change, for ``checkReadable(collection:)`` to answer without a hop.
    nonisolated let knownReadable = Mutex<Set<String>>([])
    /// Feed events emitted (``feedTable``'s listeners told), for the statistics.
    var feedEmissions = 0
    /// Objects whose subscription resumed from a checkpoint, until its replay is over.
    var awaitingCatchUp: Set<EntityKey> = []
    let outboxSignal: AsyncStream<Void>.Continuation
    let outboxSignals: AsyncStream<Void>
    /// The cache's size bound, and when its eviction passes run (``EvictionPacing``); `nil`: no bound.
    let cacheMaxEntities: Int?
    var evictionPacing: EvictionPacing?

    enum Command: Sendable {
        case activate(EntityKey)
        case refresh(EntityKey)
        case release(EntityKey)
        case activateCollection(CollectionWindow)
        case refreshCollection(CollectionWindow)
        /// Items left a window holding part of the result: fetch it again, quietly (see ``LiveCollectionState/needsRefill``).
        case refillCollection(CollectionWindow)
        case extendCollection(CollectionWindow)
        case releaseCollection(CollectionWindow)
        /// An eviction pass (``evictOverBound()``).
        case evict
        /// The end of the eviction pacing's backoff: a task of the engine's, so stopping the engine cancels it
        /// (an unstructured task outlived the engine and woke on its loop after the loop had shut down).
        case evictionWakeup(at: ContinuousClock.Instant)
    }

    public init(configuration: LiveSDKConfiguration, logger: Logger) throws {
        self.logger = logger
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        storage = StorageMonitor()
        (cache, cacheRecovery) = try CacheStore.open(path: configuration.stateDirectory + "/cache.sqlite", monitor: storage)
        (outbox, outboxSalvage) = try OutboxStore.open(path: configuration.stateDirectory + "/outbox.sqlite", monitor: storage)
        // Writes an older version queued in the cache's own table move to the outbox (first added there, then
        // removed from the cache: a crash in between leaves them in both, and the write ids skip the copies).
        let legacy = try cache.legacyOutbox()
        adoptedWrites = try outbox.adopt(legacy)
        if let last = legacy.last { try cache.clearLegacyOutbox(upTo: last.id) }
        cacheMaxEntities = configuration.cacheMaxEntities.map { max(1, $0) }
        evictionPacing = cacheMaxEntities.map { EvictionPacing(limit: $0) }
        cloud = CloudClient(baseURL: configuration.cloudURL)
        session = Session(credentials: configuration.credentials, cloud: cloud, logger: logger)
        realtimeEvents = BatchQueue<RealtimeEvent>()
        engineLoop = EngineLoop(group: configuration.eventLoopGroup)
        realtime = RealtimeConnection(
            cloudURL: configuration.cloudURL,
            session: session,
            cloudConnections: cloud.connections,
            logger: logger,
            events: realtimeEvents,
            linger: configuration.topicLinger,
            pingInterval: configuration.realtimePingInterval,
            engineLoop: engineLoop
        )
        (outboxSignals, outboxSignal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        activationDeferral = ActivationDeferral(pause: configuration.activationPause, longest: configuration.activationLongestWait)
    }

    /// The engine's loop as a task executor: a task that prefers it and calls the engine (an observation, a write)
    /// runs on the engine's thread, with no hand-off to it and back.
    public nonisolated var taskExecutor: any TaskExecutor { engineLoop.taskExecutor }

    /// A handle on one object. Cheap; observing it is what costs.
    public nonisolated func object(collection: String, id: String) -> LiveObject {
        LiveObject(client: self, key: EntityKey(collection: collection, id: id))
    }

    /// Runs the realtime connection and the engine's background work until the task is cancelled.
    public func run() async {
        // Every task the engine starts prefers its loop: nonisolated steps between the actors stay on it.
        await withTaskExecutorPreference(engineLoop.taskExecutor) { await self.runOnEngineLoop() }
    }

    private func runOnEngineLoop() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.realtime.run() }
            group.addTask { await self.runOutbox() }
            group.addTask { await self.handleRealtimeEvents() }
            group.addTask { await self.cache.runCheckpoints() }
            while let batch = await commandSink.next() {
                // The activations a batch of commands asks for run in one task (a burst's are handed over together).
                var activations: [EntityKey] = []
                for command in batch {
                    switch command {
                    case .activate(let key):
                        activations.append(key)
                    case .refresh(let key):
                        group.addTask { await self.refresh(key) }
                    case .release(let key):
                        await self.releaseIfUnobserved(key)
                    case .activateCollection(let window):
                        group.addTask { await self.activateCollection(window) }
                    case .refreshCollection(let window):
                        group.addTask { await self.refreshCollection(window) }
                    case .refillCollection(let window):
                        group.addTask { await self.refreshCollection(window, quiet: true) }
                    case .extendCollection(let window):
                        group.addTask { await self.extendCollection(window) }
                    case .releaseCollection(let window):
                        await self.releaseCollectionIfUnobserved(window)
                    case .evict:
                        group.addTask { await self.evictOverBound() }
                    case .evictionWakeup(let instant):
                        group.addTask {
                            guard (try? await Task.sleep(until: instant, clock: .continuous)) != nil else { return }
                            await self.evictionBackoffEnded()
                        }
                    }
                }
                if !activations.isEmpty { group.addTask { [activations] in await self.activate(activations) } }
            }
            group.cancelAll()
        }
        // In a task of its own: this one was cancelled to stop the engine, and the cache refuses to start a
        // write in a cancelled task (the windows' checkpoints were lost at every stop).
        await Task { await self.storeCollectionWindows() }.value
    }

    /// Closes the cache and the outbox. Call after ``run()`` has returned.
    public func close() {
        do {
            try cache.close()
        } catch {
            logger.error("closing the cache failed", metadata: ["error": "\(error)"])
        }
        do {
            try outbox.close()
        } catch {
            logger.error("closing the outbox failed", metadata: ["error": "\(error)"])
        }
    }

    /// Logs a failed cache write: a storage fault at debug level (the storage observers hear of its start and
    /// end once, where a full disk fails every event's write), any other failure as an error.
    nonisolated func logCacheFailure(_ error: LiveError, _ metadata: Logger.Metadata) {
        let level: Logger.Level = StorageFault(error.code) == nil ? .error : .debug
        logger.log(level: level, "cache write failed", metadata: metadata.merging(["error": "\(error)"]) { $1 })
    }

    /// Calls `observer` when a file of the state directory starts failing (a full or read-only file system,
    /// an I/O error, damage) and when it works again; failures in between are counted, not reported. The
    /// observer runs on the thread that saw the outcome: it must not block. Returns an id for
    /// ``removeStorageObserver(_:)``.
    public nonisolated func addStorageObserver(_ observer: @escaping @Sendable (StorageHealth.Event) -> Void) -> Int {
        storage.addObserver(observer)
    }

    public nonisolated func removeStorageObserver(_ id: Int) { storage.removeObserver(id) }

    /// Which files of the state directory are failing now, and how often they failed since.
    public nonisolated var storageHealth: StorageHealth { storage.health }

    /// Calls `observer` with every change of the cloud connection's status (Kinvey's `onStatus`).
    /// Returns an id for ``removeConnectionObserver(_:)``.
    public func addConnectionObserver(_ observer: @escaping @Sendable (ConnectionStatus) -> Void) -> Int {
        nextConnectionObserver += 1
        connectionObservers[nextConnectionObserver] = observer
        return nextConnectionObserver
    }

    public func removeConnectionObserver(_ id: Int) { connectionObservers[id] = nil }

    // MARK: Observing

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
            if let existing = observations[key] {
                observation = existing
                if request.activatesAtOnce { activateAtOnce([key]) }
            } else {
                observation = SharedObjectObservation(key: key)
                observations[key] = observation
                new.append(observation)
                if request.activatesAtOnce { startBatch.activatingAtOnce.insert(key) }
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
                let atOnce = !startBatch.activatingAtOnce.isEmpty && startBatch.activatingAtOnce.remove(observation.key) != nil
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
    private func activate(_ keys: [EntityKey]) async {
        var candidates: [(observation: SharedObjectObservation, topic: Topic, checkpoint: Int64?)] = []
        for key in keys {
            guard let observation = observations[key] else { continue }
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
            for (observation, topic, checkpoint) in candidates where observations[observation.key] === observation {
                let key = observation.key
                // Not while an earlier observation's fetch of the object still runs (it was released and observed
                // anew): this one would only be told to fetch again after it, and its topic would never be subscribed.
                if checkpoint == nil, !held.contains(topic), !fetching.contains(key) {
                    group.addTask { await self.refresh(key, subscribingFromTheRead: true) }
                    continue
                }
                if checkpoint != nil {
                    awaitingCatchUp.insert(key)
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
        let current = resumptions.filter { observations[$0.observation.key] === $0.observation }
        let outcomes = await realtime.acquire(current.map { ($0.topic, $0.checkpoint) })
        await withDiscardingTaskGroup { group in
            for (resumption, outcome) in zip(current, outcomes) {
                switch outcome {
                case .resumed:
                    continue  // caughtUp follows the replay
                case .subscribed, .refused:
                    let key = resumption.observation.key
                    if awaitingCatchUp.removeShrinking(key) != nil { observations[key]?.apply { $0.resumeAbandoned() } }
                    group.addTask { await self.refresh(key) }
                }
            }
        }
    }

    /// Fetches the object; on failure retries with backoff for as long as it is observed, so observers
    /// converge once the cloud answers again. One fetch per object at a time; a refresh asked for while
    /// one runs makes it fetch once more. `subscribingFromTheRead`: the topic is not subscribed yet, and the
    /// first successful read subscribes it from there (see ``activate(_:)``).
    private func refresh(_ key: EntityKey, subscribingFromTheRead: Bool = false) async {
        guard let observation = observations[key] else { return }
        guard !fetching.contains(key) else {
            refetchWanted.insert(key)
            return
        }
        fetching.insert(key)
        defer { fetching.removeShrinking(key) }
        var failures = 0
        var subscribeAfterRead = subscribingFromTheRead
        while observations[key] === observation {
            refetchWanted.removeShrinking(key)
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
                if subscribeAfterRead, observations[key] === observation {
                    subscribeAfterRead = false
                    if !(await gatedSubscription({ await subscribe(observation, readAt: readAt) })) { refetchWanted.insert(key) }
                }
                if !refetchWanted.contains(key) { break }
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
        if observations[key] !== observation, observations[key] != nil, refetchWanted.remove(key) != nil {
            commandSink.yield(.refresh(key))
        }
    }

    /// Subscribes the topic of an object just read as of event `readAt`, from there: the cloud replays what
    /// changed since the read, and each change is told as it comes, like any later change. (Observers were
    /// told the read, `fresh`/`loaded`: replayed silently and told once caught up, two writes landing between
    /// the read and the subscription told only the second, a skip with no resync notice, which the live-semantics
    /// checker found. A newer version a collection topic brings before the replay of an older one is a gap as
    /// any other: a resync notice, then the full state.) Returns whether the read stands; `false` when it must
    /// be read again (the cloud could not resume from it, refused the subscription, or did not say what the
    /// read was as of).
    ///
    /// Nothing is subscribed for an observation released meanwhile (its turn at the subscription gate may come
    /// long after the read): its release dropped no reference, so one taken now would stay for ever.
    private func subscribe(_ observation: SharedObjectObservation, readAt: Int64?) async -> Bool {
        let key = observation.key
        guard observations[key] === observation else { return true }
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

    private func releaseIfUnobserved(_ key: EntityKey) async {
        guard let observation = observations[key], observation.isUnobserved else { return }
        observations[key] = nil
        awaitingCatchUp.removeShrinking(key)
        askForEviction(.released)
        await realtime.release(.object(key))
    }

    /// Handles the realtime connection's events in order, a batch at a time (everything that arrived while the
    /// engine was busy: see ``BatchQueue``).
    private func handleRealtimeEvents() async {
        while let batch = await realtimeEvents.next() { await handle(batch) }
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
            guard status != connectionStatus else { return }
            connectionStatus = status
            for observer in connectionObservers.values { observer(status) }
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
                guard case .object(let key) = topic, let observation = observations[key] else { continue }
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
            guard case .object(let key) = topic, awaitingCatchUp.removeShrinking(key) != nil else { return }
            observations[key]?.apply { $0.caughtUp() }
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
        if let observation = observations[entity.key], observation.skipsVersions(entity) {
            // Events of the object were missed: said before the newer version, then fetched as after a resync.
            logger.notice(
                "resync: an event skipped versions of an observed object",
                metadata: ["key": "\(entity.key)", "version": "\(entity.version)"]
            )
            observation.apply { $0.resyncStarted() }
            commandSink.yield(.refresh(entity.key))
        }
        observations[entity.key]?.apply { $0.remoteChanged(entity) }
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

    /// Counts stores into the cache toward its size bound, and asks for an eviction pass when one is due
    /// (``EvictionPacing``). The pass runs beside the engine's other work (``evictOverBound()``), never in the path
    /// of the event or the answer that stored: a pass counts the cache and collects every observed object's key,
    /// which grows with the objects observed.
    func cacheStored(_ count: Int, fromRealtime: Bool = false) {
        askForEviction(.stored(count: count, fromRealtime: fromRealtime))
    }

    /// Asks for an eviction pass when the cache has a bound: after stores, and when an object or a window stops
    /// being observed (what it kept in the cache may go; without this the cache stayed over its bound after a
    /// burst of observations ended, until something else was stored).
    func askForEviction(_ ask: EvictionPacing.Ask) {
        guard evictionPacing != nil else { return }
        pace(evictionPacing!.ask(ask, now: .now))
    }

    private func pace(_ action: EvictionPacing.Action) {
        switch action {
        case .none:
            break
        case .run:
            commandSink.yield(.evict)
        case .wakeAt(let instant):
            commandSink.yield(.evictionWakeup(at: instant))
        }
    }

    private func evictionBackoffEnded() {
        guard evictionPacing != nil else { return }
        pace(evictionPacing!.backoffEnded(now: .now))
    }

    /// Evicts unobserved objects, least recently used first, if the cache holds more than its bound: counts them
    /// first (a read, beside the cache's writer), and only when over the bound collects the keys to keep (every
    /// observed object and every object in an observed window) and deletes in one transaction.
    func evictOverBound() async {
        var overBound = false
        defer {
            if evictionPacing != nil { pace(evictionPacing!.passEnded(overBound: overBound, now: .now)) }
        }
        guard let limit = cacheMaxEntities else { return }
        do {
            guard try await cache.entityCount() > limit else { return }
            var protected = Set(observations.keys)
            for observation in collectionWindows.observations.values {
                for entity in observation.current.items { protected.insert(entity.key) }
            }
            let (evicted, remaining) = try await cache.evict(keepingAtMost: limit, protecting: protected)
            overBound = remaining > limit
            if evicted > 0 { logger.debug("cache: evicted least recently used entities", metadata: ["count": "\(evicted)"]) }
        } catch {
            // Cancelled: the engine is stopping (the next run evicts).
            if !Task.isCancelled { logger.error("cache eviction failed", metadata: ["error": "\(error)"]) }
        }
    }

    /// How a write changes an object (see ``LiveWrite``).
    public typealias Write = LiveWrite
}

/// One observation for ``LiveClient/observe(_:)``: what ``LiveObject/observe(options:_:)`` takes.
public struct ObservationRequest: Sendable {
    public var key: EntityKey
    public var options: ObserveOptions
    /// The observer waits for fresh data (a reader that skips the cached copy, as the daemon's `freshOnly`
    /// tokens do): the object is read from the cloud as soon as its start is read, not held with a burst's
    /// cached copies until the burst pauses (``LiveSDKConfiguration/activationPause``). An observation of the
    /// object that is so held already is read at once too. `options.policy` ``ObservePolicy/freshOnly`` implies it.
    public var activatesAtOnce: Bool
    public var handler: @Sendable (LiveObjectChange) -> Void

    public init(
        key: EntityKey,
        options: ObserveOptions = ObserveOptions(),
        activatesAtOnce: Bool = false,
        handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) {
        self.key = key
        self.options = options
        self.activatesAtOnce = activatesAtOnce || options.policy == .freshOnly
        self.handler = handler
    }
}

/// A live object: observe it to receive its current state and every change.
public struct LiveObject: Sendable {
    let client: LiveClient
    public let key: EntityKey

    /// Observes the object until the returned token is invalidated or released.
    ///
    /// The handler is called serially, on the engine's executor; it must return quickly (hand work off).
    /// See ``LiveObjectState`` for the order of emissions.
    public func observe(
        options: ObserveOptions = ObserveOptions(),
        _ handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) async -> NotificationToken {
        await client.observe(key, options: options, handler: handler)
    }

    /// Observes exactly one change: the cached version if there is one, else the fetch's outcome.
    public func observeOnce(
        policy: ObservePolicy = .localThenFresh,
        _ handler: @escaping @Sendable (LiveObjectChange) -> Void
    ) async -> NotificationToken {
        await client.observe(key, options: ObserveOptions(policy: policy, once: true), handler: handler)
    }
}
