// Licensed under the Apache License, Version 2.0.

import Dispatch
import Foundation
import LiveCloudAPI
import Synchronization

/// The cloud's logins with the settings users get (bcrypt cost 12, the failed-login throttle on): how long a login
/// takes for a user that does not exist against a wrong password (the same, or the time tells who exists), and
/// what a storm of 300 logins at once does to another client's requests (its GET's latency against its idle value).
extension Bench {
    func measureLogins(directory: String, bin: String) async throws {
        say("logins: livegate-cloud on SQLite, bcrypt cost 12, default settings; work in \(directory)")
        try await measureLoginTiming(directory: directory + "/timing", bin: bin)
        try await measureLoginStorm(directory: directory + "/storm", bin: bin)
    }

    /// A cloud with the default settings and the user bench (its password hashed at the default cost at start).
    private func startDefaultCloud(directory: String, bin: String) async throws -> (cloud: Child, base: String) {
        try await launchCloud(directory: directory, bin: bin, arguments: ["--database", directory + "/cloud.sqlite"])
    }

    /// One login on a connection of its own: its status and its time in milliseconds.
    private static func login(_ base: String, user: String, password: String) throws -> (status: Int, milliseconds: Double) {
        let connection = try RawHTTPConnection(base: base)
        let started = DispatchTime.now().uptimeNanoseconds
        let status = try connection.request("POST", CloudPath.login, body: #"{"username":"\#(user)","password":"\#(password)"}"#, token: "")
        return (status, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
    }

    /// Unknown users and wrong passwords, alternately, four failures per cloud start (the throttle waits after
    /// five from an address), over six starts.
    private func measureLoginTiming(directory: String, bin: String) async throws {
        var unknown: [Double] = []
        var wrong: [Double] = []
        for round in 0..<6 {
            let (cloud, base) = try await startDefaultCloud(directory: directory + "/\(round)", bin: bin)
            defer { cloud.stop() }
            for attempt in 0..<2 {
                let stranger = try Self.login(base, user: "nobody\(round)-\(attempt)", password: "guess")
                let mistaken = try Self.login(base, user: "bench", password: "guess\(attempt)")
                guard stranger.status == 401, mistaken.status == 401 else {
                    throw BenchError("logins answered \(stranger.status) and \(mistaken.status), not 401")
                }
                unknown.append(stranger.milliseconds)
                wrong.append(mistaken.milliseconds)
            }
        }
        let (a, b) = (Percentiles(unknown).p50, Percentiles(wrong).p50)
        say(
            String(
                format: "  login time, median of %d each: unknown user %.1f ms, wrong password %.1f ms: they differ by %.1f %% (target under 10 %%)",
                unknown.count,
                a,
                b,
                abs(a - b) / b * 100
            )
        )
    }

    /// A client makes a GET every 5 ms on its keep-alive connection: 400 while the cloud is idle, then as many
    /// as fit while 300 logins (each on a connection of its own, the right password) are answered.
    private func measureLoginStorm(directory: String, bin: String) async throws {
        let (cloud, base) = try await startDefaultCloud(directory: directory, bin: bin)
        defer { cloud.stop() }
        let probe = try RawHTTPConnection(base: base)
        func probeOnce() throws -> Double {
            let started = DispatchTime.now().uptimeNanoseconds
            guard try probe.request("GET", CloudPath.stats, body: "", token: "") == 200 else { throw BenchError("stats did not answer 200") }
            return Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        }
        var idle: [Double] = []
        for _ in 0..<400 {
            idle.append(try probeOnce())
            usleep(5_000)
        }
        let cpuBefore = cloud.cpuSeconds
        let statuses = Mutex<[Int: Int]>([:])
        let remaining = Atomic<Int>(300)
        let started = ContinuousClock.now
        for _ in 0..<300 {
            Thread.detachNewThread {
                let status = (try? Self.login(base, user: "bench", password: "bench-password").status) ?? 0
                statuses.withLock { $0[status, default: 0] += 1 }
                remaining.subtract(1, ordering: .releasing)
            }
        }
        var during: [Double] = []
        while remaining.load(ordering: .acquiring) > 0 {
            during.append(try probeOnce())
            usleep(5_000)
        }
        let took = ContinuousClock.now - started
        let (quiet, storm) = (Percentiles(idle), Percentiles(during))
        say(
            String(
                format: "  300 logins at once: answered %@ in %.1f s, cloud CPU %.1f s",
                statuses.withLock { $0.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ") },
                Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18,
                cloud.cpuSeconds - cpuBefore
            )
        )
        say(
            String(
                format: "  another client's GET: idle p50 %.2f ms, p99 %.2f ms (%d); "
                    + "during the logins p50 %.2f ms (%.2fx), p99 %.2f ms (%.2fx) (%d; target within 2x)",
                quiet.p50,
                quiet.p99,
                quiet.count,
                storm.p50,
                storm.p50 / quiet.p50,
                storm.p99,
                storm.p99 / quiet.p99,
                storm.count
            )
        )
    }
}
