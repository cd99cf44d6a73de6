// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import SeededRandom
import Synchronization

/// Random schedules of writes and faults against a real `livegate-cloud` and `livegated`, with clients that
/// check every notification as it arrives (``CheckerClient``) and, after each phase, that everything settles
/// on the cloud's data as the checker's own model of queries computes it.
///
/// A run is phases of a few seconds: remote writers change items (rank, group, deletions), clients write through the
/// daemon, page their windows and observe again; one or two faults strike (realtime drops, the cloud refusing
/// connections or REST calls, the cloud killed and restarted, the daemon killed or stopped and restarted, a client that
/// stops reading, a network partition between the daemon and the cloud). Now and then a client observes an object the
/// daemon has never held while the remote writer creates it and writes it again at once: the engine reads a new object
/// and subscribes its topic from the read, and those writes land between the two (the window where a version replayed
/// after the read must still be told). Then writes and faults stop, and the checker waits for every token to show the
/// cloud's data, `count` and paging flags exactly, for the daemon's token count to equal the tokens the clients hold
/// and its outbox to be empty; then every write must have been applied once (``WriteLedger``). A daemon stopped with
/// SIGTERM (as a fault, and at the end of the run) must exit with status 0 within 25 s.
struct LiveSemanticsChecker {
    static let collection = "chk"
    static let groups = ["g1", "g2"]

    enum Fault: String, CaseIterable, Sendable {
        case realtimeDrop, cloudRefusesRealtime, cloudFailsRequests, cloudLosesWriteAnswers, cloudKilled, daemonKilled, daemonStopped,
            slowReader
        /// A network partition between the daemon and the cloud for 0.5-3 s: every connection open between them
        /// goes silent for good (neither side closes it; what is sent is lost), new ones too until it heals.
        case cloudSilent
    }

    struct Figures: CustomStringConvertible {
        var phases = 0
        var faults: [Fault: Int] = [:]
        var remoteWrites = 0
        var localWrites = 0
        var notifications = 0
        var settleChecks = 0
        var objectsObservedAnew = 0
        /// The daemon's `cache-max-entities` in this run, if bounded.
        var cacheBound: Int?
        var description: String {
            let faultText = faults.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", ")
            return
                "\(phases) phases, \(faults.values.reduce(0, +)) faults (\(faultText)), \(remoteWrites) remote and \(localWrites) local writes, \(objectsObservedAnew) objects observed anew under writes, \(notifications) notifications checked, \(settleChecks) settled states compared, cache bound \(cacheBound.map(String.init) ?? "none")"
        }
    }

    let seed: UInt64
    let duration: Duration
    /// The faults a schedule draws from.
    var faults: [Fault] = Fault.allCases
    let itemCount = 30
    /// At most this many objects made during a run (observed anew as they are written).
    let newItemLimit = 120

    func run() async throws -> (Figures, [String], CheckerLog) {
        var random = SeededGenerator(seed: seed)
        let retention = Bool.random(using: &random) ? 60 : 100_000
        // Half the runs bound the daemon's cache below what the clients observe over a run, so that unobserved
        // objects are evicted under the same faults. Drawn apart from the schedule: a seed's schedule stays
        // what it was before runs were bounded.
        var bounding = SeededGenerator(seed: seed ^ 0x6361_6368_6562_6f75)
        let cacheBound = Bool.random(using: &bounding) ? Int.random(in: 5...40, using: &bounding) : nil
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--event-retention", "\(retention)"])
        defer { cluster.stop() }
        // The daemon reaches the cloud through a proxy that can partition them (``Fault/cloudSilent``), and pings
        // it each second, so that a partition is noticed within a phase.
        let proxy = try PartitionProxy(upstreamPort: cluster.cloudPort)
        defer { proxy.stop() }
        let config = cluster.directory + "/livegated.conf"
        try ("realtime-ping-seconds = 1\n" + (cacheBound.map { "cache-max-entities = \($0)\n" } ?? ""))
            .write(toFile: config, atomically: true, encoding: .utf8)
        let daemonArguments = ["--config", config, "--cloud-url", "http://127.0.0.1:\(proxy.port)"]
        try await cluster.startDaemon(extraArguments: daemonArguments)
        let log = CheckerLog()
        log.note("seed \(seed), event retention \(retention), cache bound \(cacheBound.map(String.init) ?? "none")")
        var figures = Figures()
        figures.cacheBound = cacheBound
        let ids = (0..<itemCount).map { "i\($0)" }
        let ledger = WriteLedger()
        var remote = try await RemoteWriter(cluster: cluster, ledger: ledger, ids: ids)
        for id in ids {
            _ = try await remote.put(
                id,
                ["group": .string(Self.groups.randomElement(using: &random)!), "rank": .integer(Int.random(in: 0..<50, using: &random))]
            )
        }
        _ = ledger.check(versions: try await remote.liveItems().mapValues(\.version))  // the versions writes count from
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }

        let clients = (0..<3).map { n -> CheckerClient in
            var plans: [CheckerClient.Plan] = (0..<3).map { _ in .object(id: ids.randomElement(using: &random)!) }
            for slot in 0..<2 {
                let query = CheckedQuery(
                    group: Bool.random(using: &random) ? Self.groups.randomElement(using: &random) : nil,
                    descending: Bool.random(using: &random),
                    pageSize: Int.random(in: 3...12, using: &random)
                )
                plans.append(.collection(slot: slot, query))
            }
            return CheckerClient(name: "c\(n)", plans: plans, log: log, ledger: ledger)
        }
        for client in clients { try await client.connect(cluster.socketPath) }

        let clock = ContinuousClock()
        let end = clock.now + duration
        while clock.now < end || figures.phases == 0 {
            figures.phases += 1
            let phase = figures.phases
            let faults = (0..<Int.random(in: 1...2, using: &random)).map { _ in self.faults.randomElement(using: &random)! }
            log.note("phase \(phase): \(faults.map(\.rawValue))")
            let phaseSeed = random.next()
            let (remoteCount, localCount) = try await runPhase(
                cluster: cluster,
                proxy: proxy,
                daemonArguments: daemonArguments,
                clients: clients,
                faults: faults,
                remote: &remote,
                seed: phaseSeed,
                log: log
            )
            for fault in faults { figures.faults[fault, default: 0] += 1 }
            figures.remoteWrites += remoteCount
            figures.localWrites += localCount
            try await settle(cluster: cluster, proxy: proxy, clients: clients, remote: &remote, log: log)
            figures.settleChecks += 1
            if !log.violations.isEmpty { break }
        }
        figures.notifications = log.notifications
        figures.objectsObservedAnew = remote.ids.count - itemCount
        for client in clients { client.disconnect() }
        if log.violations.isEmpty, let problem = cluster.stopDaemonCleanly() { log.violation(problem) }
        return (figures, log.violations, log)
    }

    /// One phase: writes and actions for about 2–4 s, the faults striking at random moments within it.
    private func runPhase(
        cluster: TestCluster,
        proxy: PartitionProxy,
        daemonArguments: [String],
        clients: [CheckerClient],
        faults: [Fault],
        remote: inout RemoteWriter,
        seed: UInt64,
        log: CheckerLog
    ) async throws -> (Int, Int) {
        var random = SeededGenerator(seed: seed)
        let clock = ContinuousClock()
        let length = Duration.milliseconds(Int.random(in: 2000...4000, using: &random))
        let start = clock.now
        var schedule = faults.map { (at: start + .milliseconds(Int.random(in: 200...1800, using: &random)), fault: $0) }
            .sorted { $0.at < $1.at }
        var remoteCount = 0
        var localCount = 0
        while clock.now - start < length {
            if let next = schedule.first, clock.now >= next.at {
                schedule.removeFirst()
                try await strike(
                    next.fault,
                    cluster: cluster,
                    proxy: proxy,
                    daemonArguments: daemonArguments,
                    clients: clients,
                    random: &random,
                    log: log
                )
            }
            let id = remote.ids.randomElement(using: &random)!
            switch Int.random(in: 0..<40, using: &random) {
            case 0, 1:
                if try await remote.delete(id) { remoteCount += 1 }
            case 2..<8:
                let client = clients.randomElement(using: &random)!
                if client.isConnected {
                    try? await client.write(
                        id: id,
                        group: Self.groups.randomElement(using: &random)!,
                        rank: Int.random(in: 0..<50, using: &random)
                    )
                    localCount += 1
                }
            case 8..<12:
                let client = clients.randomElement(using: &random)!
                if client.isConnected { try? await client.act(using: &random) }
            case 12 where remote.ids.count < itemCount + newItemLimit:
                let client = clients.randomElement(using: &random)!
                guard client.isConnected else { break }
                remoteCount += try await observeAnewUnderWrites(client, remote: &remote, random: &random, log: log)
            default:
                if try await remote.put(id, randomData(using: &random)) { remoteCount += 1 }
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 5...40, using: &random)))
            try await reconnect(clients, cluster: cluster)
        }
        return (remoteCount, localCount)
    }

    private func randomData(using random: inout SeededGenerator) -> JSONValue {
        ["group": .string(Self.groups.randomElement(using: &random)!), "rank": .integer(Int.random(in: 0..<50, using: &random))]
    }

    /// A client observes an object the daemon has never held (its observation reads the object, then subscribes
    /// its topic from the read) while the remote writer makes it and writes it again at once, without waiting
    /// for the observation's answer: some of those writes land between the read and the subscription, and are
    /// replayed to the daemon. Observed before it exists (told `notExist`, then each version) or just after its
    /// first write. Returns the writes applied.
    private func observeAnewUnderWrites(
        _ client: CheckerClient,
        remote: inout RemoteWriter,
        random: inout SeededGenerator,
        log: CheckerLog
    ) async throws -> Int {
        let id = "n\(remote.ids.count - itemCount)"
        let observeFirst = Bool.random(using: &random)
        log.note("\(client.name) observes \(id) anew under writes (\(observeFirst ? "before" : "after") it is made)")
        if observeFirst { try? await client.observeAnew(id) }
        var applied = 0
        if try await remote.put(id, randomData(using: &random)) { applied += 1 }
        if !observeFirst { try? await client.observeAnew(id) }
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            if try await remote.put(id, randomData(using: &random)) { applied += 1 }
        }
        return applied
    }

    private func strike(
        _ fault: Fault,
        cluster: TestCluster,
        proxy: PartitionProxy,
        daemonArguments: [String],
        clients: [CheckerClient],
        random: inout SeededGenerator,
        log: CheckerLog
    ) async throws {
        log.note("FAULT \(fault.rawValue)")
        switch fault {
        case .realtimeDrop:
            try await cluster.fault(#"{"dropConnections":true}"#)
        case .cloudRefusesRealtime:
            try await cluster.fault(#"{"dropConnections":true,"refuseConnectionsForMs":\#(Int.random(in: 300...1500, using: &random))}"#)
        case .cloudFailsRequests:
            try await cluster.fault(#"{"failRequests":\#(Int.random(in: 1...6, using: &random))}"#)
        case .cloudLosesWriteAnswers:
            // Applied, then answered 503: the writer (the daemon's outbox, the remote writer) sends it again.
            try await cluster.fault(#"{"loseWriteAnswers":\#(Int.random(in: 1...4, using: &random))}"#)
        case .cloudKilled:
            try await cluster.killAndRestartCloud()
        case .daemonKilled, .daemonStopped:
            if fault == .daemonKilled {
                cluster.signalDaemon(SIGKILL)
                cluster.stopDaemon()
            } else if let problem = cluster.stopDaemonCleanly() {
                log.violation(problem)
            }
            try await cluster.startDaemon(extraArguments: daemonArguments)
            try await reconnect(clients, cluster: cluster)
            // Right after the restart, an object observed anew and written at once, before any answer (the
            // daemon's first state for it once showed it deleted, `notExist`/`notLoading`, its write pending).
            let client = clients.randomElement(using: &random)!
            if client.isConnected {
                let id = "i\(Int.random(in: 0..<itemCount, using: &random))"
                log.note("\(client.name) observes \(id) anew and writes it at once")
                try? await client.observeAnew(id)
                try? await client.write(id: id, group: Self.groups.randomElement(using: &random)!, rank: Int.random(in: 0..<50, using: &random))
            }
        case .cloudSilent:
            proxy.partition()
            let length = Duration.milliseconds(Int.random(in: 500...3000, using: &random))
            Task {
                try? await Task.sleep(for: length)
                proxy.heal()
            }
        case .slowReader:
            let client = clients.randomElement(using: &random)!
            let pause = Duration.milliseconds(Int.random(in: 300...1500, using: &random))
            Task {
                await client.setReading(false)
                try? await Task.sleep(for: pause)
                await client.setReading(true)
            }
        }
    }

    /// Reconnects clients whose connection ended, and observes again what a failed observation left out.
    private func reconnect(_ clients: [CheckerClient], cluster: TestCluster) async throws {
        for client in clients {
            if !client.isConnected {
                try? await client.connect(cluster.socketPath)
            } else {
                for plan in client.missingPlans() { try? await client.observe(plan) }
            }
        }
    }

    /// Writes and faults stopped: everything must come to show the cloud's data.
    private func settle(
        cluster: TestCluster,
        proxy: PartitionProxy,
        clients: [CheckerClient],
        remote: inout RemoteWriter,
        log: CheckerLog
    ) async throws {
        try await cluster.fault("{}")
        proxy.heal()
        for client in clients { await client.setReading(true) }
        let deadline = ContinuousClock.now + .seconds(30)
        var differences: [String] = []
        while ContinuousClock.now < deadline {
            try await reconnect(clients, cluster: cluster)
            let live = try await remote.liveItems()
            differences = clients.flatMap { $0.differences(from: live) }
            if differences.isEmpty, clients.allSatisfy({ $0.isConnected && $0.outstandingRequests == 0 && $0.missingPlans().isEmpty }) {
                try await clients[0].requestStats()
                try await Task.sleep(for: .milliseconds(50))
                let held = clients.map(\.tokenCount).reduce(0, +)
                if let counted = clients[0].statsTokens, let pending = clients[0].statsPendingWrites {
                    if counted == held, pending == 0 {
                        // Every acknowledged write has reached the cloud: each must have been applied once.
                        let versions = try await remote.liveItems().mapValues(\.version)
                        for violation in remote.ledger.check(versions: versions) { log.violation(violation) }
                        log.note("settled: \(held) tokens")
                        return
                    }
                    differences = ["the daemon holds \(counted) tokens, the clients \(held); \(pending) writes wait in its outbox"]
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        for difference in differences { log.violation("not settled within 30 s: \(difference)") }
    }
}

/// The remote writer: another device writing to the cloud's REST API, and the checker's read of the truth.
struct RemoteWriter {
    let cluster: TestCluster
    let ledger: WriteLedger
    private var token: String
    /// The objects written so far (the run's first ones, then those made during it), live or deleted.
    private(set) var ids: [String]

    init(cluster: TestCluster, ledger: WriteLedger, ids: [String]) async throws {
        self.cluster = cluster
        self.ledger = ledger
        self.ids = ids
        token = try await cluster.login()
    }

    /// A write; `false` when it was not applied, or the cloud did not answer it (a fault).
    mutating func put(_ id: String, _ data: JSONValue) async throws -> Bool {
        if !ids.contains(id) { ids.append(id) }
        let body = String(decoding: try JSONEncoder().encode(PutObjectRequest(data: data)), as: UTF8.self)
        return try await write(.PUT, id, json: body)
    }

    mutating func delete(_ id: String) async throws -> Bool {
        try await write(.DELETE, id, json: nil)
    }

    /// A write under an `Idempotency-Key`, sent again under it through a fault until the cloud answers (for
    /// about a second): each is then known applied or not, and counted in the ledger. One the cloud never
    /// answered is counted as of unknown outcome.
    private mutating func write(_ method: HTTPMethod, _ id: String, json: String?) async throws -> Bool {
        let path = CloudPath.object(EntityKey(collection: LiveSemanticsChecker.collection, id: id))
        let key = "chk-\(UUID().uuidString)"
        for attempt in 0..<12 {
            if attempt > 0 { try await Task.sleep(for: .milliseconds(100)) }
            guard let answer = try? await cluster.call(method, path, json: json, token: token, headers: [("Idempotency-Key", key)]) else {
                continue
            }
            switch answer.status {
            case 200, 201:
                ledger.applied(id)
                return true
            case 404 where method == .DELETE:
                return false  // deleted already: nothing applied
            case 401:
                token = (try? await cluster.login()) ?? token
            case 500...:
                continue
            default:
                throw CheckFailure("the cloud answered \(method) \(path) with \(answer.status): \(answer.body.prefix(200))")
            }
        }
        ledger.unknown(id)
        return false
    }

    /// Every live item of the collection as the cloud stores it now (retrying through a restart of it).
    mutating func liveItems() async throws -> [String: CheckedItem] {
        var items: [String: CheckedItem] = [:]
        for id in ids {
            let path = CloudPath.object(EntityKey(collection: LiveSemanticsChecker.collection, id: id))
            var attempt = 0
            while true {
                let answer = try? await cluster.call(.GET, path, token: token)
                if let answer, answer.status == 404 { break }
                if let answer, answer.status == 200, let entity = try? JSONValue(parsing: answer.body) {
                    if entity["deleted"] != .bool(true), let item = CheckedItem(snapshot: entity) { items[id] = item }
                    break
                }
                if answer?.status == 401 { token = (try? await cluster.login()) ?? token }
                attempt += 1
                if attempt > 100 { throw CheckFailure("the cloud did not answer GET \(path): \(answer?.status ?? 0)") }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        return items
    }
}
