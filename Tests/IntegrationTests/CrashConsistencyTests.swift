// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import SeededRandom
import Testing

/// Kills the daemon at random moments while a client queues writes (the cloud taking them as they come, or
/// refusing so that they pile up in the outbox), restarts it, and checks after each kill that every
/// acknowledged write reached the cloud exactly once and in order.
///
/// Write `k` replaces the object with `{"k": k}` under `ifVersion: k - 1`: the cloud applies it only right
/// after write `k - 1`. So the object at version `v` with `{"k": v}` means writes 1…v were applied in order,
/// each once (a duplicate, a reordering or a lost write ends the chain with a conflict: the daemon rolls
/// the rest back, and the version stops short). An acknowledged write is one answered `{"queued": true}`;
/// a write sent but not answered before the kill may or may not have been applied.
///
/// Seeded: `LIVEGATE_CRASH_SEED` repeats a run, `LIVEGATE_CRASH_ITERATIONS` sets its length
/// (`scripts/crash-test` runs a long one). A failure prints the seed and the rounds up to it.
@Suite(.serialized) struct CrashConsistencyTests {
    struct Round: CustomStringConvertible {
        var number: Int
        var cloudRefuses: Bool
        var killAfter: Duration
        var termFirst: Bool
        var acknowledged: Int64 = 0
        var sent: Int64 = 0
        var applied: Int64 = 0
        var description: String {
            "round \(number): cloud \(cloudRefuses ? "refusing" : "serving"), \(termFirst ? "SIGTERM then " : "")SIGKILL after \(killAfter), "
                + "acknowledged up to \(acknowledged), sent up to \(sent), cloud at \(applied)"
        }
    }

    @Test func everyAcknowledgedWriteReachesTheCloudOnceAndInOrderAcrossKills() async throws {
        let settings = ProcessInfo.processInfo.environment
        let iterations = settings["LIVEGATE_CRASH_ITERATIONS"].flatMap(Int.init) ?? 12
        let seed = settings["LIVEGATE_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1..<(1 << 53))
        var random = SeededGenerator(seed: seed)
        // No backtracer: a daemon crashing here is killed moments later, and the backtracer it started would
        // outlive it holding the client's socket open (the client then never sees the end). A crash is
        // still caught: the runtime's "Fatal error" line reaches the log first.
        let environment = ["SWIFT_BACKTRACE": "enable=no"]
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        try await cluster.startDaemon(environment: environment)
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        var rounds: [Round] = []
        var cloudVersion: Int64 = 0
        var acknowledgedTotal: Int64 = 0
        for number in 1...iterations {
            var round = Round(
                number: number,
                cloudRefuses: Int.random(in: 0..<3, using: &random) == 0,
                killAfter: .milliseconds(Int.random(in: 0..<400, using: &random)),
                termFirst: Bool.random(using: &random)
            )
            let termToKill = Duration.milliseconds(Int.random(in: 0..<40, using: &random))
            try await cluster.fault(round.cloudRefuses ? #"{"failRequests":100000}"# : #"{"failRequests":0}"#)
            guard let pid = cluster.daemonPID else { throw ClusterError("no daemon") }
            let (killAfter, termFirst) = (round.killAfter, round.termFirst)
            let killer = Task {
                try await Task.sleep(for: killAfter)
                if termFirst {
                    // SIGTERM starts the clean stop (the cache's checkpoint); the kill lands somewhere in it.
                    kill(pid, SIGTERM)
                    try await Task.sleep(for: termToKill)
                }
                kill(pid, SIGKILL)
            }
            var next = cloudVersion + 1
            round.acknowledged = cloudVersion
            round.sent = cloudVersion
            do {
                try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "crash") { daemon in
                    while true {
                        round.sent = next
                        try await daemon.queueUpdate(collection: "crash", id: "chain", data: ["k": .integer(next)], ifVersion: next - 1)
                        round.acknowledged = next
                        next += 1
                    }
                }
            } catch {
                // The daemon died under the client: the round's writes end here.
            }
            try await killer.value
            cluster.stopDaemon()
            try await cluster.fault(#"{"failRequests":0}"#)
            try await cluster.startDaemon(environment: environment)
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "crash-check") { daemon in
                try await eventually("the outbox sent (\(round))", timeout: .seconds(60)) { try await daemon.stats().pendingWrites == 0 }
            }
            let stored = try? await cluster.get("crash", "chain")
            round.applied = stored?.version ?? 0
            rounds.append(round)
            let trace = "seed \(seed) (LIVEGATE_CRASH_SEED=\(seed)):\n" + rounds.map(\.description).joined(separator: "\n")
            #expect(round.applied >= round.acknowledged, "an acknowledged write is missing; \(trace)")
            #expect(round.applied <= round.sent, "a write applied that was never sent; \(trace)")
            if let stored {
                #expect(stored.data == ["k": .integer(stored.version)], "the chain broke: \(stored.data); \(trace)")
            }
            #expect(!cluster.daemonLog.contains("the cloud rejected a write"), "a write was rolled back; \(trace)")
            #expect(!cluster.daemonLog.contains("Fatal error"), "the daemon crashed rather than being killed; \(trace)")
            if round.applied < round.acknowledged || stored.map({ $0.data != ["k": .integer($0.version)] }) == true { return }
            acknowledgedTotal += round.acknowledged - cloudVersion
            cloudVersion = round.applied
        }
        print(
            "crash consistency: seed \(seed), \(iterations) kills, \(acknowledgedTotal) acknowledged writes, "
                + "\(cloudVersion) applied, every one once and in order"
        )
    }
}
