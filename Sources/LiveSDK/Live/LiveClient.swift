// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import Synchronization

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
    /// The cache, the outbox and how they fare.
    let files: StateFiles
    package let realtime: RealtimeConnection
    /// The loop the engine runs on (see ``EngineLoop``).
    let engineLoop: EngineLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { engineLoop.serialExecutor }
    /// What the engine's loop is asked to do (``Command``), taken a batch at a time by ``runOnEngineLoop()``.
    let commandSink = BatchQueue<Command>()
    /// ``permissions.readable`` as of its last change, for ``checkReadable(collection:)`` to answer without a hop.
    nonisolated let knownReadable = Mutex<Set<String>>([])

    // The engine's state, a part per concern, each in the file that works with it.

    /// The objects observed: their shared observations and their reads (LiveClient+Objects.swift).
    package var objects = ObjectObservationsState()
    /// How object observations start in bursts (LiveClient+BatchedStart.swift).
    package var objectStarts: ObjectStarts
    /// Collection windows: one record of each kind per window (LiveClient+Collections.swift).
    var collectionWindows = CollectionWindowsState()
    /// The write outbox's waiters and the write in flight (LiveClient+Outbox.swift).
    var writeState = WriteOutboxState()
    /// Stream and feed subscribers (LiveClient+Streams.swift, LiveClient+Feeds.swift).
    var subscribers = Subscribers()
    /// What the cloud lets the session's user read (LiveClient+Permissions.swift).
    var permissions = CollectionPermissions()
    /// The realtime connection's status, who is told of it, and the retries it ends (LiveClient+Retry.swift).
    var connectionWatch = ConnectionWatch()
    /// The cache's size bound, and when its eviction passes run (LiveClient+Eviction.swift).
    var eviction: EvictionState

    /// The cache of the objects and results seen.
    package nonisolated var cache: CacheStore { files.cache }
    /// The acknowledged writes waiting for the cloud, in a file of their own.
    nonisolated var outbox: OutboxStore { files.outbox }
    /// How the state directory's files fare (see ``addStorageObserver(_:)``).
    nonisolated var storage: StorageMonitor { files.monitor }
    /// What opening the state directory's files found (a damaged cache moved aside, a salvaged outbox).
    public nonisolated var startReport: StateFilesStartReport { files.startReport }
    public var connectionStatus: ConnectionStatus { connectionWatch.status }
    /// The cloud's API, through the session's connections.
    nonisolated var cloud: CloudClient { session.cloud }

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
        files = try StateFiles.open(directory: configuration.stateDirectory)
        let maxEntities = configuration.cacheMaxEntities.map { max(1, $0) }
        eviction = EvictionState(maxEntities: maxEntities, pacing: maxEntities.map { EvictionPacing(limit: $0) })
        let cloud = CloudClient(baseURL: configuration.cloudURL)
        session = Session(credentials: configuration.credentials, cloud: cloud, logger: logger)
        engineLoop = EngineLoop(group: configuration.eventLoopGroup)
        realtime = RealtimeConnection(
            cloudURL: configuration.cloudURL,
            session: session,
            cloudConnections: cloud.connections,
            logger: logger,
            linger: configuration.topicLinger,
            pingInterval: configuration.realtimePingInterval,
            engineLoop: engineLoop
        )
        objectStarts = ObjectStarts(
            activationDeferral: ActivationDeferral(pause: configuration.activationPause, longest: configuration.activationLongestWait)
        )
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
        connectionWatch.nextID += 1
        connectionWatch.observers[connectionWatch.nextID] = observer
        return connectionWatch.nextID
    }

    public func removeConnectionObserver(_ id: Int) { connectionWatch.observers[id] = nil }

    /// How a write changes an object (see ``LiveWrite``).
    public typealias Write = LiveWrite
}
