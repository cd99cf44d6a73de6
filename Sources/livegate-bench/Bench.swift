// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import AsyncHTTPClient
import Dispatch
import Foundation
import LiveChangeSet
import LiveCloudAPI
import LiveGateVersion
import NIOCore
import NIOHTTP1
import NIOPosix

/// Measures livegated's fan-out against Redis pub/sub on the same machine, with the same subscribers, payload
/// and rates, and prints the figures (see README, "Benchmarks").
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegate-bench",
        abstract: "Fan-out benchmark: livegated vs Redis pub/sub, plus memory per token and an end-to-end row.",
        version: LiveGateVersion.current
    )

    @Option(help: "Subscriber counts, comma-separated.") var subscribers = "1,100,1000"
    @Option(help: "Updates sent as fast as possible, per throughput run.") var burst = 2000
    @Option(help: "Updates per second in the latency runs.") var rate = 2000
    @Option(help: "Seconds each latency run lasts.") var seconds = 3.0
    @Option(help: "How many times the fan-out rows run (each run's table, then each row's median and range).") var runs = 5
    @Flag(
        help:
            "After each latency run, its p50 / p99 / max latency per 100 ms of send time, how many subscribers ever waited over 100 ms, and how many received fewer than were sent."
    )
    var timeline = false
    @Option(help: "Approximate payload size in bytes (the object's data / the Redis message).") var payloadBytes = 256
    @Option(help: "Tokens for the memory run (spread over 100 connections).") var tokens = 100_000
    @Option(help: "Where livegated and livegate-cloud are (default: next to this program).") var binDirectory: String?
    @Option(help: "The daemon's event-loops setting (default: its own, auto).") var eventLoops: String?
    @Option(help: "The daemon's cache-max-entities setting (default: its own, no bound).") var cacheMaxEntities: Int?
    @Option(help: "redis-server to compare with.") var redisServer = "/usr/bin/redis-server"
    @Flag(help: "Keep the work directory (the processes' logs and databases) after a run that succeeded; one that failed keeps it always.")
    var keepWork = false
    @Flag(help: "Skip the Redis rows.") var skipRedis = false
    @Flag(help: "Skip the forwarder floor's rows (the design's transport alone: WebSocket in, the same bytes to every client).")
    var skipFloor = false
    @Option(help: .hidden) var serveFloor: String?
    @Option(help: .hidden) var floorCloudURL: String?
    @Option(help: .hidden) var floorRoutedObjects: Int?
    @Option(help: .hidden) var floorWorkMicroseconds = 0
    @Flag(help: "Skip the memory run.") var skipMemory = false
    @Flag(help: "Skip the end-to-end row through livegate-cloud.") var skipEndToEnd = false
    @Option(help: "Distinct objects observed on one connection in the many-objects runs, comma-separated (through livegate-cloud on SQLite).")
    var manyObjects = "10000"
    @Option(help: "How many times the many-objects runs restart the daemon and time the cached answers (each, then their median and range).")
    var restarts = 1
    @Flag(help: "Only the many-objects runs.") var manyObjectsOnly = false
    @Flag(help: "Skip the many-objects runs.") var skipManyObjects = false
    @Option(help: "Observations written at once in the turns runs (an app's start beside another connection's round trips).")
    var turnsBurst = 10_000
    @Option(help: "How many turns runs (each, then their medians).") var turnsRuns = 5
    @Flag(help: "Only the turns runs.") var turnsOnly = false
    @Flag(help: "Only the cloud's logins: an unknown user's time against a wrong password's, and 300 logins beside another client's GETs.")
    var loginsOnly = false
    @Flag(help: "Skip the turns runs.") var skipTurns = false
    @Flag(help: "Only the in-process figures: a change set's computation and a realtime event's decoding (no processes started).")
    var changeSetsOnly = false
    @Flag(help: "Only the many-updates run: --spread-objects objects, one token each, --spread-rate updates/s over them for --seconds.")
    var spreadOnly = false
    @Option(help: "Objects of the many-updates run.") var spreadObjects = 10_000
    @Option(help: "Updates per second of the many-updates run, each to the next object in turn.") var spreadRate = 20_000
    @Option(
        help:
            "The many-updates run's forwarder floors: µs of work each spends per event before forwarding it (a spin), comma-separated; each is a run of its own."
    )
    var spreadFloorWork = "0"
    @Flag(help: "Only the engine (LiveSDK in-process) and cloud write figures.") var engineOnly = false
    @Flag(help: "Skip the engine and cloud write figures.") var skipEngine = false
    @Option(help: "Items of the query result read by index from the engine's cache (engine figures; 0 skips it).") var resultItems = 100_000
    @Flag(help: "Only livegate-cloud itself: writes and realtime delivery, on SQLite and (with --postgres) PostgreSQL.") var cloudOnly = false
    @Option(help: "Objects written for the cloud's query figures (pages of a 100,000-object collection; 0 skips them).") var queryObjects = 100_000
    @Flag(help: "With --cloud-only: only the query figures.") var queriesOnly = false
    @Option(help: "Writes/s of the cloud's open-loop latency row (default: half the 64-writer rate just measured; fixed, runs compare).")
    var pacedWriteRate: Double?
    @Option(help: "A PostgreSQL database URL for the cloud figures (scripts/bench-cloud starts a private server).") var postgres: String?
    @Option(
        help:
            "Only the burst memory run: this many bursts of --rate updates/s for --seconds to the largest --subscribers count, the daemon's RSS before, at peak and 10 s after each."
    )
    var burstMemory: Int?

    func run() async throws {
        if let serveFloor, let floorCloudURL, let floorRoutedObjects {
            try await ForwarderFloor.serve(
                cloudURL: floorCloudURL,
                routedTopics: (0..<floorRoutedObjects).map { .object(EntityKey(collection: LoadCloud.collection, id: "s\($0)")) },
                workPerFrame: .microseconds(floorWorkMicroseconds),
                socketPath: serveFloor,
                clientLoops: max(1, System.coreCount - 1)
            )
            return
        }
        if let serveFloor, let floorCloudURL {
            try await ForwarderFloor.serve(
                cloudURL: floorCloudURL,
                topic: .object(EntityKey(collection: LoadCloud.collection, id: "o1")),
                socketPath: serveFloor,
                clientLoops: max(1, System.coreCount - 1)
            )
            return
        }
        measureChangeSets()
        measureRealtimeDecoding()
        try await measureCacheWrites()
        try await measureCacheWrites(batch: 1, eventsPerRun: 2_000)
        if changeSetsOnly { return }
        var template = Array("/tmp/lgbench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed") }
        let directory = String(cString: made)
        let bin = binDirectory ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
        // Every process the runs started is stopped by the time they return (their `defer`s), so the directory is
        // theirs no longer: removed after a run that succeeded (a many-objects run leaves ~40 MB of databases), kept
        // for its logs after one that failed.
        do {
            try await measure(directory: directory, bin: bin)
        } catch {
            say("livegate-bench failed; its processes' logs and databases are kept in \(directory)")
            throw error
        }
        if keepWork {
            say("work kept in \(directory)")
        } else {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// The runs the options ask for, in `directory`, with the binaries of `bin`.
    private func measure(directory: String, bin: String) async throws {
        if cloudOnly {
            try await measureClouds(directory: directory + "/clouds", bin: bin)
            return
        }
        if manyObjectsOnly {
            try await measureManyObjects(directory: directory, bin: bin)
            return
        }
        if turnsOnly {
            try await measureTurns(directory: directory + "/turns", bin: bin)
            return
        }
        if loginsOnly {
            try await measureLogins(directory: directory + "/logins", bin: bin)
            return
        }
        if spreadOnly {
            try await measureManyUpdates(directory: directory, bin: bin, objects: spreadObjects, rate: spreadRate, seconds: seconds)
            return
        }
        if engineOnly || !skipEngine {
            try await measureEngineAndCloud(directory: directory + "/engine", bin: bin)
            if engineOnly { return }
        }
        let counts = subscribers.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        say(
            "livegate-bench: payload ~\(payloadBytes) B, burst \(burst) updates, \(rate) updates/s for \(seconds) s; "
                + "livegated event-loops = \(eventLoops ?? "auto"), cache-max-entities = \(cacheMaxEntities.map(String.init) ?? "none"); work in \(directory)"
        )

        let cloud = LoadCloud(payloadBytes: payloadBytes)
        let port = Int.random(in: 20_000..<40_000)
        // The publishers (the load cloud's WebSocket, the Redis publisher) get a loop of their own: on the
        // subscribers' loops, an update waited behind their reads before it was even sent, for both systems.
        let publisherLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let cloudServer = try await cloud.serve(port: port, eventLoopGroup: publisherLoop)
        defer { cloudServer.close(promise: nil) }

        let daemon = try await startDaemon(directory: directory + "/d1", cloudURL: "http://127.0.0.1:\(port)", bin: bin)
        defer { daemon.stop() }
        if let burstMemory {
            try await measureBurstMemory(daemon, subscribers: counts.max() ?? 1000, bursts: burstMemory) { _ = cloud.publish() }
            return
        }
        let redisServers = skipRedis ? [] : try await startRedisServers(directory: directory)
        defer { for server in redisServers { server.process.stop() } }
        var runs: [[Row]] = []
        for run in 1...max(1, self.runs) {
            if self.runs > 1 { say("fan-out run \(run) of \(self.runs)") }
            var rows: [Row] = []
            for count in counts {
                rows += try await measureFanOut(
                    count,
                    daemon: daemon,
                    cloud: cloud,
                    directory: directory,
                    port: port,
                    publisherLoop: publisherLoop,
                    redisServers: redisServers
                )
            }
            printTable(rows)
            runs.append(rows)
        }
        printSummary(runs)

        if !skipMemory {
            daemon.stop()
            let fresh = try await startDaemon(directory: directory + "/d2", cloudURL: "http://127.0.0.1:\(port)", bin: bin)
            defer { fresh.stop() }
            try await measureMemory(fresh)
        }
        if !skipEndToEnd {
            printTable(try await measureEndToEnd(directory: directory + "/e2e", bin: bin))
        }
        if !skipManyObjects { try await measureManyObjects(directory: directory, bin: bin) }
        if !skipTurns { try await measureTurns(directory: directory + "/turns", bin: bin) }
    }

    /// A redis-server of the fan-out runs, and how its row publishes.
    struct RedisServer {
        let system: String
        let socket: String
        /// Whether each update is stored as it is published (``RedisPublisher/storeAndPublish(_:)``).
        let stores: Bool
        let process: Child
    }

    /// The Redis servers of the fan-out rows: pub/sub alone, and Redis as the daemon keeps its data (each update
    /// stored and published in one MULTI, appended to its log, written to disk every second).
    private func startRedisServers(directory: String) async throws -> [RedisServer] {
        let plain = try Child(
            "redis-server",
            redisServer,
            ["--port", "0", "--unixsocket", directory + "/redis.sock", "--save", "", "--appendonly", "no", "--maxclients", "20000"],
            log: directory + "/redis.log"
        )
        var servers = [RedisServer(system: "redis pub/sub", socket: directory + "/redis.sock", stores: false, process: plain)]
        do {
            try FileManager.default.createDirectory(atPath: directory + "/redis-aof", withIntermediateDirectories: true)
            let persisting = try Child(
                "redis-server",
                redisServer,
                [
                    "--port", "0", "--unixsocket", directory + "/redis-aof.sock", "--dir", directory + "/redis-aof", "--save", "",
                    "--appendonly", "yes", "--appendfsync", "everysec", "--maxclients", "20000",
                ],
                log: directory + "/redis-aof.log"
            )
            servers.append(
                RedisServer(system: "redis SET+PUBLISH, appendonly", socket: directory + "/redis-aof.sock", stores: true, process: persisting)
            )
            for server in servers { try await waitForSocket(server.socket, what: "redis-server (\(server.system))") }
        } catch {
            for server in servers { server.process.stop() }
            throw error
        }
        return servers
    }

    /// One fan-out run of `count` subscribers: livegated, the forwarder floor, Redis pub/sub, and Redis storing
    /// each update as it publishes it (the rows asked for).
    private func measureFanOut(
        _ count: Int,
        daemon: DaemonProcess,
        cloud: LoadCloud,
        directory: String,
        port: Int,
        publisherLoop: MultiThreadedEventLoopGroup,
        redisServers: [RedisServer]
    ) async throws -> [Row] {
        var rows: [Row] = []
        let pool = try await connectSubscribers(count, to: daemon)
        // Fresh once read; its topic subscribed from the read just after. The load cloud replays nothing, so an
        // update sent before that would never reach the daemon (a burst started at once lost its first
        // updates, or all of them).
        try await waitUntil("the daemon subscribed to the object's topic") { cloud.subscriptions(of: "o1") == 1 }
        say("  \(count) subscribers connected to livegated")
        let cloudBurst: BurstSender = { count in
            cloud.prepareBurst(count)
            return { try await cloud.publishPrepared() }
        }
        rows.append(
            try await measure("livegated", pool: pool, burst: burst, rate: rate, process: daemon.child, burstSender: cloudBurst) { cloud.publish() }
        )
        await pool.close()

        if !skipFloor {
            // Alone on the object's topic: the daemon's observation lingers a moment after its last token.
            try await waitUntil("the daemon to leave the load cloud's topic") { cloud.subscriptions(of: "o1") == 0 }
            let floor = try await startFloor(directory: directory, port: port)
            defer { floor.stop() }
            let floorPool = try await SubscriberPool.connect(
                count: count,
                socketPath: directory + "/floor.sock",
                greeting: "",
                readyMarker: ForwarderFloor.readyMarker
            )
            try await waitUntil("\(count) floor subscribers ready") { floorPool.readyCount == count }
            rows.append(
                try await measure("forwarder floor", pool: floorPool, burst: burst, rate: rate, process: floor, burstSender: cloudBurst) {
                    cloud.publish()
                }
            )
            await floorPool.close()
        }

        for server in redisServers {
            let publisher = try await RedisPublisher(socketPath: server.socket, eventLoopGroup: publisherLoop)
            let redisPool = try await SubscriberPool.connect(
                count: count,
                socketPath: server.socket,
                greeting: "SUBSCRIBE bench\r\n",
                readyMarker: "subscribe"
            )
            try await waitUntil("\(count) redis subscribers ready") { redisPool.readyCount == count }
            let command: @Sendable () -> StampedMessage = { RedisPublisher.command(cloud.redisPayload, stores: server.stores) }
            let redisBurst: BurstSender = { count in
                let commands = TakeOnce((0..<count).map { _ in command() })
                return { try await publisher.publishBurst(commands) }
            }
            rows.append(
                try await measure(server.system, pool: redisPool, burst: burst, rate: rate, process: server.process, burstSender: redisBurst) {
                    publisher.publish(command())
                }
            )
            await redisPool.close()
            await publisher.close()
        }
        return rows
    }

    // MARK: Change sets

    /// How long computing a change set takes for a 10,000-item result: 1 % of items deleted, 1 % inserted,
    /// 1 % modified, 10 moved.
    func measureChangeSets() {
        let count = 10_000
        var generator = SystemRandomNumberGenerator()
        let old = Array(0..<count)
        var new = old.filter { _ in Int.random(in: 0..<100, using: &generator) != 0 }
        for id in count..<(count + count / 100) { new.insert(id, at: Int.random(in: 0...new.count, using: &generator)) }
        for _ in 0..<10 { new.swapAt(Int.random(in: 0..<new.count, using: &generator), Int.random(in: 0..<new.count, using: &generator)) }
        let modified = Set((0..<(count / 100)).map { _ in Int.random(in: 0..<count, using: &generator) })
        var runs: [Double] = []
        var changes = ChangeSet()
        for _ in 0..<20 {
            let start = DispatchTime.now().uptimeNanoseconds
            changes = ChangeSet.between(old: old, new: new) { oldIndex, _ in modified.contains(old[oldIndex]) }
            runs.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        runs.sort()
        say(
            "change set for \(count) items (\(changes.deletions.count) deletions, \(changes.insertions.count) insertions, "
                + "\(changes.modifications.count) modifications, \(changes.moves.count) moves): median \(String(format: "%.2f", runs[runs.count / 2])) ms "
                + "over \(runs.count) runs"
        )
    }

    /// The engine's decoding of one realtime event (what the load cloud sends for an update: a ~256-byte object),
    /// in process: the part of an update's cost that is the parse and the reading of the parsed document.
    func measureRealtimeDecoding() {
        let cloud = LoadCloud(payloadBytes: payloadBytes)
        let messages = (0..<1_000).map { (index: Int) -> String in
            let version = Int64(index + 1)
            return cloud.eventText(id: "o\(index % 10)", version: version, seq: version, t: UInt64(index))
        }
        var runs: [Double] = []
        var versions: Int64 = 0
        for _ in 0..<20 {
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<10 {
                for message in messages {
                    guard let decoded = try? CloudJSON.decodeRealtimeMessage(from: message) else { continue }
                    versions &+= decoded.entity?.version ?? 0
                }
            }
            runs.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3 / Double(10 * messages.count))
        }
        runs.sort()
        say(
            "realtime event decoding (\(messages[0].utf8.count) bytes): median \(String(format: "%.2f", runs[runs.count / 2])) µs per event "
                + "over \(runs.count) runs of \(10 * messages.count) (checksum \(versions))"
        )
    }

    // MARK: Fan-out

    struct Row {
        var system: String
        var subscribers: Int
        var burstDelivered: Int
        var burstExpected: Int
        var deliveriesPerSecond: Double
        var sentRate: Double
        var latencyDelivered: Int
        var latencyExpected: Int
        var p50: Double
        var p99: Double
        /// What each part cost in the burst, and at the paced rate: never mixed.
        var burstCost: PhaseCost
        var pacedCost: PhaseCost
    }

    /// The CPU one phase of a row cost, each process (or part of this one) apart, from the scheduler's counts.
    struct PhaseCost {
        /// The system's process (livegated, the forwarder floor, redis-server) per update sent; `nil` when the
        /// row has none of its own.
        var system: Double?
        /// The load generator per update sent: this process but its subscribers' loops (the publisher: the load
        /// cloud's WebSocket, or the Redis client; and the benchmark's own bookkeeping).
        var generator: Double
        /// The subscribers' loops per delivery.
        var subscribers: Double
    }

    /// Clocks of one phase's CPU: the system's process, this whole process, and its subscribers' loops.
    struct PhaseClocks {
        let system: CPUClock?
        let benchmark: CPUClock
        let subscribers: CPUClock

        init(system: Child?, subscriberThreads: [Int32]) {
            self.system = system?.cpuClock
            benchmark = CPUClock(pid: getpid())
            subscribers = CPUClock(threads: subscriberThreads)
        }

        /// What the phase cost since the clocks were made, for `updates` sent and `deliveries` received.
        func cost(updates: Int, deliveries: Int) -> PhaseCost {
            let subscriberSeconds = subscribers.seconds
            return PhaseCost(
                system: system.map { $0.seconds * 1e6 / Double(max(1, updates)) },
                generator: max(0, benchmark.seconds - subscriberSeconds) * 1e6 / Double(max(1, updates)),
                subscribers: subscriberSeconds * 1e6 / Double(max(1, deliveries))
            )
        }
    }

    /// Renders a burst of updates ahead, and gives what sends it (rendering is not the generator's cost per update).
    typealias BurstSender = @Sendable (Int) -> @Sendable () async throws -> Void

    /// A burst of `burst` updates as fast as `publish` goes (deliveries per second), then `rate` updates per
    /// second for `seconds` (latency). The same for every row: in-process publishers and REST writes alike.
    func measure(
        _ system: String,
        pool: SubscriberPool,
        burst: Int,
        rate: Int,
        process: Child? = nil,
        burstWriters: Int = 1,
        burstSender: BurstSender? = nil,
        publish: @escaping @Sendable () async throws -> Void
    ) async throws -> Row {
        let n = pool.receptions.count
        let subscriberThreads = try await threadIDs(of: MultiThreadedEventLoopGroup.singleton)
        say("  \(system), N=\(n): burst of \(burst)…")
        // Throughput: a burst as fast as the sender can go (rendered first, when it can be: not the generator's cost).
        pool.resetCounts(recordLatencies: false)
        let sendBurst = burstSender?(burst)
        var clocks = PhaseClocks(system: process, subscriberThreads: subscriberThreads)
        let start = DispatchTime.now().uptimeNanoseconds
        if let sendBurst {
            try await sendBurst()
        } else if burstWriters > 1 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<burstWriters {
                    group.addTask { for _ in stride(from: writer, to: burst, by: burstWriters) { try await publish() } }
                }
                try await group.waitForAll()
            }
        } else {
            for _ in 0..<burst { try await publish() }
        }
        let published = Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
        say("  \(system), N=\(n): the burst sent at \(Int(Double(burst) / published))/s by \(burstWriters) writer(s)")
        let (burstDelivered, burstCost) = try await settle(pool, expected: n * burst, clocks: clocks, updates: burst)
        let last = pool.receptions.map(\.lastAt).max() ?? start
        let deliveriesPerSecond = Double(burstDelivered) / (Double(last &- start) / 1e9)

        // Latency: a fixed rate.
        say("  \(system), N=\(n): \(burstDelivered) of \(n * burst) delivered; now \(rate)/s for \(seconds) s…")
        pool.resetCounts(recordLatencies: true, recordStamps: timeline)
        clocks = PhaseClocks(system: process, subscriberThreads: subscriberThreads)
        let total = Int(Double(rate) * seconds)
        let sendSeconds = try await send(total, rate: rate) { _ in try await publish() }
        let (delivered, pacedCost) = try await settle(pool, expected: n * total, clocks: clocks, updates: total)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(delivered)
        for reception in pool.receptions { latencies += reception.latencies }
        if timeline { printTimeline(system, pool.receptions, sentPerSubscriber: total) }
        latencies.sort()
        let percentile = { (p: Double) in milliseconds(atPercentile: p, of: latencies) }
        let row = Row(
            system: system,
            subscribers: n,
            burstDelivered: burstDelivered,
            burstExpected: n * burst,
            deliveriesPerSecond: deliveriesPerSecond,
            sentRate: Double(total) / sendSeconds,
            latencyDelivered: delivered,
            latencyExpected: n * total,
            p50: percentile(0.5),
            p99: percentile(0.99),
            burstCost: burstCost,
            pacedCost: pacedCost
        )
        say(
            "  \(system), N=\(n): \(Int(deliveriesPerSecond)) deliveries/s; p50 \(String(format: "%.2f", row.p50)) ms, "
                + "p99 \(String(format: "%.2f", row.p99)) ms"
        )
        return row
    }

    /// The latency run's p50 / p99 / max per 100 ms of send time (one `window:p50/p99/max` per window, in ms),
    /// how many subscribers ever waited over 100 ms (whether a tail is a moment every subscriber lived
    /// through, or a few subscribers behind for long), and how many received fewer than were sent (coalesced).
    func printTimeline(_ system: String, _ receptions: [Reception], sentPerSubscriber: Int) {
        let start = receptions.compactMap { $0.stamps.min() }.min() ?? 0
        var windows: [Int: [UInt64]] = [:]
        for reception in receptions {
            for (stamp, latency) in zip(reception.stamps, reception.latencies) {
                windows[Int((stamp &- start) / 100_000_000), default: []].append(latency)
            }
        }
        var line = "  \(system), N=\(receptions.count): p50/p99/max ms per 100 ms of send time from \(start) ns of CLOCK_MONOTONIC:"
        for window in windows.keys.sorted() {
            let sorted = windows[window, default: []].sorted()
            let figures = [0.5, 0.99].map { milliseconds(atPercentile: $0, of: sorted) } + [Double(sorted.last ?? 0) / 1e6]
            line += " \(window):" + figures.map { String(format: "%.0f", $0) }.joined(separator: "/")
        }
        say(line)
        let behind = receptions.filter { ($0.latencies.max() ?? 0) > 100_000_000 }.count
        let coalesced = receptions.filter { $0.deliveries < sentPerSubscriber }.count
        say(
            "  \(system), N=\(receptions.count): \(behind) of \(receptions.count) subscribers waited over 100 ms at least once; "
                + "\(coalesced) received fewer than the \(sentPerSubscriber) sent"
        )
    }

    /// Calls `publish` `total` times (with the count sent before), `rate` times a second; returns the seconds it took.
    func send(_ total: Int, rate: Int, _ publish: (Int) async throws -> Void) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        var sent = 0
        while sent < total {
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            let due = min(total, Int(elapsed * Double(rate)) + 1)
            while sent < due {
                try await publish(sent)
                sent += 1
            }
            try await Task.sleep(for: .microseconds(200))
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Waits until `expected` deliveries arrived, or none arrived for a second (coalesced or dropped); returns the count.
    /// ``settle(_:expected:)`` for a pool, with what the phase cost up to its last delivery: read when the deliveries
    /// stop coming (not after the second of quiet that ends the wait, nor at every change: each reading is a
    /// `/proc` read of this process's threads).
    func settle(_ pool: SubscriberPool, expected: Int, clocks: PhaseClocks, updates: Int) async throws -> (Int, PhaseCost) {
        var total = 0
        var quietSince = ContinuousClock.now
        var costAtQuiet: PhaseCost?
        while true {
            let now = pool.delivered.count
            if now >= expected { return (now, clocks.cost(updates: updates, deliveries: now)) }
            if now != total {
                total = now
                quietSince = .now
                costAtQuiet = nil
            } else {
                let cost = costAtQuiet ?? clocks.cost(updates: updates, deliveries: total)
                costAtQuiet = cost
                if ContinuousClock.now - quietSince > .seconds(1) { return (total, cost) }
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func settle(_ receptions: [Reception], expected: Int) async throws -> Int {
        var total = 0
        var quietSince = ContinuousClock.now
        while true {
            let now = receptions.reduce(0) { $0 + $1.deliveries }
            if now >= expected { return now }
            if now != total {
                total = now
                quietSince = .now
            } else if ContinuousClock.now - quietSince > .seconds(1) {
                return total
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func printTable(_ rows: [Row]) {
        say("")
        say(
            "| system | N | deliveries/s (burst) | delivered (burst) | sent/s | p50 ms | p99 ms | delivered (rate) "
                + "| burst CPU µs/update: system, generator | paced CPU µs/update: system, generator | subscribers' CPU µs/delivery: burst, paced |"
        )
        say("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        func micros(_ value: Double?) -> String { value.map { String(format: $0 < 10 ? "%.2f" : "%.1f", $0) } ?? "-" }
        for row in rows {
            say(
                "| \(row.system) | \(row.subscribers) | \(Int(row.deliveriesPerSecond)) | \(row.burstDelivered)/\(row.burstExpected) | "
                    + "\(Int(row.sentRate)) | \(String(format: "%.2f", row.p50)) | \(String(format: "%.2f", row.p99)) | "
                    + "\(row.latencyDelivered)/\(row.latencyExpected) | \(micros(row.burstCost.system)), \(micros(row.burstCost.generator)) | "
                    + "\(micros(row.pacedCost.system)), \(micros(row.pacedCost.generator)) | "
                    + "\(micros(row.burstCost.subscribers)), \(micros(row.pacedCost.subscribers)) |"
            )
        }
    }

    /// Each row's median and range over the runs (rows of one system and N, in the order first seen).
    func printSummary(_ runs: [[Row]]) {
        guard runs.count > 1 else { return }
        say("")
        say("medians (ranges) over \(runs.count) runs:")
        say("")
        say(
            "| system | N | deliveries/s (burst) | p50 ms | p99 ms | burst CPU µs/update: system | paced CPU µs/update: system | burst CPU µs/update: generator |"
        )
        say("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        var keys: [String] = []
        var byKey: [String: [Row]] = [:]
        for row in runs.joined() {
            let key = "\(row.system) | \(row.subscribers)"
            if byKey[key] == nil { keys.append(key) }
            byKey[key, default: []].append(row)
        }
        func figures(_ rows: [Row], _ value: (Row) -> Double?) -> String {
            let values = rows.compactMap(value)
            guard !values.isEmpty else { return "-" }
            return medianAndRange(values) { String(format: $0 >= 1000 ? "%.0f" : $0 >= 10 ? "%.1f" : "%.2f", $0) }
        }
        for key in keys {
            let rows = byKey[key, default: []]
            say(
                "| \(key) | \(figures(rows) { $0.deliveriesPerSecond }) | \(figures(rows) { $0.p50 }) | \(figures(rows) { $0.p99 }) | "
                    + "\(figures(rows) { $0.burstCost.system }) | \(figures(rows) { $0.pacedCost.system }) | \(figures(rows) { $0.burstCost.generator }) |"
            )
        }
    }

    // MARK: Memory per token

    func measureMemory(_ daemon: DaemonProcess) async throws {
        let connections = 100
        let perConnection = max(1, tokens / connections)
        var lines = #"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"bench","protocol":1}}"# + "\n"
        // One token per connection first, on o0…o99: the baseline has the connections, the objects and their cache rows.
        lines += #"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"bench","id":"m0"}}"# + "\n"
        var pools: [SubscriberPool] = []
        for c in 0..<connections {
            let first = lines.replacingOccurrences(of: #""id":"m0""#, with: #""id":"m\#(c)""#)
            pools.append(
                try await SubscriberPool.connect(count: 1, socketPath: daemon.socket, greeting: first, readyMarker: #""dataStatus":"fresh""#)
            )
        }
        try await waitUntil("the baseline tokens") { pools.allSatisfy { $0.readyCount == 1 } }
        let before = daemon.child.residentKiB
        for (c, pool) in pools.enumerated() {
            var more = ""
            for k in 1..<perConnection {
                more +=
                    #"{"jsonrpc":"2.0","id":\#(k + 1),"method":"object.observe","params":{"collection":"bench","id":"m\#((c + k) % connections)"}}"#
                    + "\n"
            }
            try await pool.channels[0].writeAndFlush(ByteBuffer(string: more))
        }
        try await waitUntil("\(connections * perConnection) tokens", timeout: .seconds(300)) {
            pools.allSatisfy { $0.receptions[0].markers >= perConnection }
        }
        let after = daemon.child.residentKiB
        let added = connections * (perConnection - 1)
        let perToken = Double(after - before) * 1024 / Double(added)
        say("memory: \(connections * perConnection) tokens on \(connections) connections and \(connections) objects;")
        say("  daemon RSS \(before / 1024) MiB before the last \(added) tokens, \(after / 1024) MiB after: \(Int(perToken)) bytes per token")
        for pool in pools { await pool.close() }
    }

    // MARK: End to end

    /// A real livegate-cloud (on SQLite in `directory` unless `storage` says otherwise) with one user
    /// (bench), and a signed-in access token.
    func startCloud(directory: String, bin: String, storage: [String]? = nil) async throws -> (cloud: Child, base: String, access: String) {
        let (cloud, base) = try await launchCloud(
            directory: directory,
            bin: bin,
            arguments: ["--bcrypt-cost", "4"] + (storage ?? ["--database", directory + "/cloud.sqlite"])
        )
        let login = try await httpJSON(.POST, base + CloudPath.login, #"{"username":"bench","password":"bench-password"}"#, token: nil)
        return (cloud, base, try JSONDecoder().decode(LoginResponse.self, from: login).accessToken)
    }

    /// A livegate-cloud with `arguments` and one user (bench, its password in clear), on a port of its own.
    func launchCloud(directory: String, bin: String, arguments: [String]) async throws -> (cloud: Child, base: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "bench:bench-password\n".write(toFile: directory + "/users", atomically: true, encoding: .utf8)
        let output = Pipe()
        let cloud = try Child(
            "livegate-cloud",
            bin + "/livegate-cloud",
            ["--port", "0", "--users-file", directory + "/users"] + arguments,
            log: directory + "/cloud.log",
            stdout: output
        )
        let line = try await awaitLine(output, containing: "listening on")
        guard let port = line.split(separator: ":").last.flatMap({ Int($0) }) else { throw BenchError("no port in \(line)") }
        return (cloud, "http://127.0.0.1:\(port)")
    }

    /// Two rows: writes one after another, then 64 writers at once (group commit shares their transactions;
    /// `HTTPClient.shared` carries them on its 8 connections to the cloud).
    func measureEndToEnd(directory: String, bin: String) async throws -> [Row] {
        let (cloud, base, access) = try await startCloud(directory: directory, bin: bin)
        defer { cloud.stop() }
        let padding = String(repeating: "x", count: max(0, payloadBytes - 40))
        @Sendable func put() async throws {
            let body = #"{"data":{"pad":"\#(padding)","t":\#(DispatchTime.now().uptimeNanoseconds)}}"#
            _ = try await httpJSON(.PUT, base + CloudPath.object(EntityKey(collection: "bench", id: "e2e")), body, token: access)
        }
        _ = try await httpJSON(.PUT, base + CloudPath.object(EntityKey(collection: "bench", id: "e2e")), #"{"data":{"t":0}}"#, token: access)
        let daemon = try await startDaemon(directory: directory + "/daemon", cloudURL: base, bin: bin, username: "bench", password: "bench-password")
        defer { daemon.stop() }
        let n = 100
        let greeting =
            #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"bench","protocol":1}}"# + "\n"
            + #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"bench","id":"e2e"}}"# + "\n"
        let pool = try await SubscriberPool.connect(count: n, socketPath: daemon.socket, greeting: greeting, readyMarker: #""dataStatus":"fresh""#)
        try await waitUntil("\(n) subscribers ready") { pool.readyCount == n }
        defer { Task { await pool.close() } }

        // Writes one after the other (each a committed SQLite transaction), then 200 writes/s.
        let oneWriter = try await measure(
            "livegated + livegate-cloud (SQLite), end to end from the REST write",
            pool: pool,
            burst: 500,
            rate: 200,
            process: daemon.child,
            publish: put
        )
        let manyWriters = try await measure(
            "livegated + livegate-cloud (SQLite), end to end from the REST write, 64 writers",
            pool: pool,
            burst: 4000,
            rate: 500,
            process: daemon.child,
            burstWriters: 64,
            publish: put
        )
        return [oneWriter, manyWriters]
    }

    func httpJSON(_ method: HTTPMethod, _ url: String, _ body: String, token: String?) async throws -> Data {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        guard (200..<300).contains(Int(response.status.code)) else { throw BenchError("\(method) \(url): HTTP \(response.status.code)") }
        return Data(bytes.readableBytesView)
    }

    // MARK: Processes

    /// `count` clients of `daemon`, each observing the object the load cloud publishes, once all have it fresh.
    func connectSubscribers(_ count: Int, to daemon: DaemonProcess) async throws -> SubscriberPool {
        let greeting =
            #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"bench","protocol":1}}"# + "\n"
            + #"{"jsonrpc":"2.0","id":2,"method":"object.observe","params":{"collection":"bench","id":"o1"}}"# + "\n"
        let pool = try await SubscriberPool.connect(
            count: count,
            socketPath: daemon.socket,
            greeting: greeting,
            readyMarker: #""dataStatus":"fresh""#
        )
        try await waitUntil("\(count) daemon subscribers ready") { pool.readyCount == count }
        return pool
    }

    struct DaemonProcess {
        let child: Child
        let socket: String
        func stop() { child.stop() }
    }

    func startDaemon(directory: String, cloudURL: String, bin: String, username: String = "bench", password: String = "bench")
        async throws -> DaemonProcess
    {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\(password)\n".write(toFile: directory + "/password", atomically: true, encoding: .utf8)
        // The defaults users get, but where a run asks for more than they allow (more subscribers than
        // max-connections, more objects on one connection than max-tokens-per-connection): then only that is
        // raised, and said.
        var raised: [String] = []
        let subscriberCounts = subscribers.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        if let most = subscriberCounts.max(), most + 16 > 1024 { raised.append("max-connections = \(most + 16)") }
        let objectCounts = manyObjects.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } + [turnsBurst]
        if let most = objectCounts.max(), most > 10_000 { raised.append("max-tokens-per-connection = \(most)") }
        if !raised.isEmpty { say("  livegated settings raised for this run's sizes: \(raised.joined(separator: ", "))") }
        let config =
            raised.joined(separator: "\n") + (eventLoops.map { "\nevent-loops = \($0)" } ?? "")
            + (cacheMaxEntities.map { "\ncache-max-entities = \($0)" } ?? "")
        try config.write(toFile: directory + "/livegated.conf", atomically: true, encoding: .utf8)
        let socket = directory + "/livegate.sock"
        let child = try Child(
            "livegated",
            bin + "/livegated",
            [
                "--config", directory + "/livegated.conf", "--socket", socket, "--state-dir", directory + "/state",
                "--cloud-url", cloudURL, "--username", username, "--password-file", directory + "/password",
                "--log-level", "warning", "--log-target", "stderr",
            ],
            log: directory + "/daemon.log"
        )
        try await waitForSocket(socket, what: "livegated")
        return DaemonProcess(child: child, socket: socket)
    }

    /// The forwarder floor (``ForwarderFloor``), this program in its serving mode, on the load cloud at `port`;
    /// with `routedObjects`, the routed floor of the objects `bench/s0` … (the many-updates run's), spending
    /// `workMicroseconds` of CPU per event.
    func startFloor(directory: String, port: Int, routedObjects: Int? = nil, workMicroseconds: Int = 0) async throws -> Child {
        let floor = try Child(
            "forwarder floor",
            CommandLine.arguments[0],
            ["--serve-floor", directory + "/floor.sock", "--floor-cloud-url", "ws://127.0.0.1:\(port)\(CloudPath.realtime)"]
                + (routedObjects.map { ["--floor-routed-objects", String($0), "--floor-work-microseconds", String(workMicroseconds)] } ?? []),
            log: directory + "/floor.log"
        )
        try await waitForSocket(directory + "/floor.sock", what: "the forwarder floor", timeout: .seconds(120))
        return floor
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(60), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw BenchError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Prints a line at once (stdout is a pipe in CI, and a run can be long).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

/// The `p` quantile (0…1) of sorted nanosecond latencies, in milliseconds; NaN when there are none.
func milliseconds(atPercentile p: Double, of sorted: [UInt64]) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6
}
