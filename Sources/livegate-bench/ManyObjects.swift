// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import NIOCore
import NIOHTTP1

/// Many distinct objects observed on one connection, its requests pipelined (a desktop app opening a list of
/// thousands of items): how long until every token has the cloud's answer, how many requests and realtime
/// messages that cost upstream, the daemon's memory per observed object, and how long the same observations
/// take when the daemon holds the objects already (another connection) or after a restart (its cache).
extension Bench {
    func measureManyObjects(directory: String, bin: String) async throws {
        let counts = manyObjects.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        for count in counts {
            try await measureManyObjects(count, directory: directory + "/many-\(count)", bin: bin)
        }
    }

    private func measureManyObjects(_ count: Int, directory: String, bin: String) async throws {
        let (cloud, base, access) = try await startCloud(directory: directory + "/cloud", bin: bin)
        defer { cloud.stop() }
        // The first 10,000 exist (written 32 at a time); any beyond are observed as not existing, which costs
        // the daemon the same (a fetch, a subscription, the state).
        let existing = min(count, 10_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<32 {
                group.addTask {
                    for k in stride(from: lane, to: existing, by: 32) {
                        let key = EntityKey(collection: "many", id: "i\(k)")
                        _ = try await httpJSON(.PUT, base + CloudPath.object(key), #"{"data":{"n":\#(k),"title":"item \#(k)"}}"#, token: access)
                    }
                }
            }
            try await group.waitForAll()
        }
        let daemonDirectory = directory + "/daemon"
        var daemon = try await startDaemon(directory: daemonDirectory, cloudURL: base, bin: bin, username: "bench", password: "bench-password")
        defer { daemon.stop() }
        let hello = #"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"bench","protocol":1}}"# + "\n"
        var observes = ""
        for k in 0..<count {
            observes += #"{"jsonrpc":"2.0","id":\#(k + 1),"method":"object.observe","params":{"collection":"many","id":"i\#(k)"}}"# + "\n"
        }
        let loaded = #""loadingStatus":"loaded""#
        say("many objects: \(count) distinct objects (\(existing) existing) observed on one connection, requests pipelined")

        // From nothing: every token gets the cloud's answer.
        let before = try await cloudStats(base)
        let rssBefore = daemon.child.residentKiB
        let observed = ContinuousClock.now
        let (fresh, first) = try await timeObservations(
            count,
            daemon: daemon.child,
            socket: daemon.socket,
            greeting: hello + observes,
            marker: loaded,
            keepOpen: true
        )
        let rssAfter = daemon.child.residentKiB
        // Each object is read first, then its topic subscribed from the read: the subscriptions follow the answers.
        var after = try await cloudStats(base)
        while after.subscriptions.keys.count(where: { $0.hasPrefix("object:many/") }) < count {
            guard ContinuousClock.now - observed < .seconds(600) else { throw BenchError("the daemon did not subscribe every object") }
            try await Task.sleep(for: .milliseconds(50))
            after = try await cloudStats(base)
        }
        let subscribed = ContinuousClock.now - observed
        // What stays once the burst's transient memory (parsed requests, queued answers, tasks in flight) is
        // given back: the daemon trims its allocator once idle for 2 s (sampled each second). The least of 12
        // samples over the next 6 s.
        var rssSettled = rssAfter
        for _ in 0..<12 {
            try await Task.sleep(for: .milliseconds(500))
            rssSettled = min(rssSettled, daemon.child.residentKiB)
        }
        let reads = after.readRequests - before.readRequests
        let messages = after.realtimeMessages - before.realtimeMessages
        say(
            "  all fresh after \(format(fresh.all)) ms (first \(format(fresh.first)) ms, half \(format(fresh.half)) ms; daemon CPU \(format(fresh.cpuPerObservation)) µs an object), all subscribed after "
                + "\(format(milliseconds(subscribed))) ms; "
                + "upstream \(reads) read requests and \(messages) realtime messages "
                + "(\(String(format: "%.1f", Double(count) / Double(max(1, reads + messages)))) new objects per request)"
        )
        say(
            "  daemon RSS \(rssBefore / 1024) → \(rssAfter / 1024) MiB right after, \(rssSettled / 1024) MiB settled: "
                + "\(Int(Double(rssSettled - rssBefore) * 1024 / Double(count))) bytes per observed object with its one token "
                + "(\(Int(Double(rssAfter - rssBefore) * 1024 / Double(count))) right after)"
        )

        // The same objects from a second connection, while the first holds them.
        let (held, _) = try await timeObservations(count, daemon: daemon.child, socket: daemon.socket, greeting: hello + observes, marker: loaded)
        say(
            "  held by the daemon (second connection, the first still observing): all answered fresh after \(format(held.all)) ms "
                + "(first \(format(held.first)) ms, half \(format(held.half)) ms; daemon CPU \(format(held.cpuPerObservation)) µs an object)"
        )
        // Both connections closed (the second's close just started): every topic lingers, then is unsubscribed.
        let closing = ContinuousClock.now
        let cpuAtClose = daemon.child.cpuClock
        let messagesAtClose = try await cloudStats(base).realtimeMessages
        await first?.close()
        var closed = try await cloudStats(base)
        while closed.subscriptions.keys.contains(where: { $0.hasPrefix("object:many/") }) {
            guard ContinuousClock.now - closing < .seconds(120) else { throw BenchError("the daemon did not unsubscribe every object") }
            try await Task.sleep(for: .milliseconds(20))
            closed = try await cloudStats(base)
        }
        let unsubscribed = ContinuousClock.now - closing
        say(
            "  both connections closed: every topic unsubscribed upstream after "
                + "\(format(milliseconds(unsubscribed))) ms "
                + "(the topics linger 2 s), in \(closed.realtimeMessages - messagesAtClose) realtime messages; "
                + "daemon CPU \(format(cpuAtClose.seconds / Double(count) * 1e6)) µs an object"
        )

        // After a restart: the cache answers at once, then the cloud. Each restart's connection reads until every
        // object is fresh again, then closes (its topics linger in the daemon stopped next).
        var cachedTimes: [Double] = []
        var cachedCPU: [Double] = []
        for _ in 0..<max(1, restarts) {
            daemon.stop()
            daemon = try await startDaemon(directory: daemonDirectory, cloudURL: base, bin: bin, username: "bench", password: "bench-password")
            let (cached, _) = try await timeObservations(
                count,
                daemon: daemon.child,
                socket: daemon.socket,
                greeting: hello + observes,
                marker: #""dataStatus":"local""#,
                also: loaded
            )
            cachedTimes.append(cached.all)
            cachedCPU.append(cached.cpuPerObservation)
            say(
                "  after a restart: \(existing) cached answers after \(format(cached.all)) ms (first \(format(cached.first)) ms, half \(format(cached.half)) ms; daemon CPU \(format(cached.cpuPerObservation)) µs an object); "
                    + "all fresh again after \(format(cached.alsoAll ?? .nan)) ms"
            )
        }
        if cachedTimes.count > 1 {
            func summary(_ values: [Double]) -> String { "median " + medianAndRange(values) }
            say(
                "  over \(cachedTimes.count) restarts: cached answers after \(summary(cachedTimes)) ms; daemon CPU \(summary(cachedCPU)) µs an object"
            )
        }
    }

    private struct ObservationTimes {
        /// Milliseconds from the write of the requests to the first, the middle (half of those expected) and
        /// the last marked notification, as the bench's reads brought them.
        var first: Double
        var half: Double
        var all: Double
        /// The daemon's CPU time from the write of the requests to the last marked notification, in microseconds
        /// per marked notification (summed over its threads: ``CPUClock``).
        var cpuPerObservation: Double
        /// With `also`: to the last notification carrying that marker.
        var alsoAll: Double?
    }

    /// Connects, writes `greeting` (hello and the observations) at once, and times the notifications carrying
    /// `marker` until `count` have come (only the existing objects have a cached copy: `marker` `local`
    /// counts those), then (with `also`) until `count` carry `also`.
    private func timeObservations(
        _ count: Int,
        daemon: Child,
        socket: String,
        greeting: String,
        marker: String,
        also: String? = nil,
        keepOpen: Bool = false
    ) async throws -> (ObservationTimes, SubscriberPool?) {
        let expected = marker.contains("local") ? min(count, 10_000) : count
        let started = ContinuousClock.now
        let startedNanos = DispatchTime.now().uptimeNanoseconds
        let cpuClock = daemon.cpuClock
        // Returns once the whole burst is written (the daemon read it) and a marker came: the arrivals are
        // timed as the reads brought them, not from here.
        let pool = try await SubscriberPool.connect(count: 1, socketPath: socket, greeting: greeting, readyMarker: marker)
        defer { if !keepOpen { Task { await pool.close() } } }
        let deadline = ContinuousClock.now + .seconds(600)
        while pool.receptions[0].markers < expected {
            guard ContinuousClock.now < deadline else { throw BenchError("\(pool.receptions[0].markers) of \(expected) observations answered") }
            try await Task.sleep(for: .milliseconds(1))
        }
        let cpu = cpuClock.seconds
        let arrivals = pool.receptions[0].markerArrivals
        func arrived(_ markers: Int) -> Double {
            let at = arrivals.first { $0.count >= markers }?.at ?? startedNanos
            return Double(at &- startedNanos) / 1e6
        }
        var alsoAll: Double?
        if let also {
            let second = try await SubscriberPool.connect(count: 1, socketPath: socket, greeting: greeting, readyMarker: also)
            defer { Task { await second.close() } }
            while second.receptions[0].markers < count {
                guard ContinuousClock.now < deadline else { throw BenchError("\(second.receptions[0].markers) of \(count) observations fresh") }
                try await Task.sleep(for: .milliseconds(1))
            }
            alsoAll = milliseconds(ContinuousClock.now - started)
        }
        return (
            ObservationTimes(
                first: arrived(1),
                half: arrived((expected + 1) / 2),
                all: arrived(expected),
                cpuPerObservation: cpu / Double(expected) * 1e6,
                alsoAll: alsoAll
            ), keepOpen ? pool : nil
        )
    }

    /// The cloud's counters.
    func cloudStats(_ base: String) async throws -> CloudStats {
        var request = HTTPClientRequest(url: base + CloudPath.stats)
        request.method = .GET
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 64 << 20)
        return try JSONDecoder().decode(CloudStats.self, from: Data(body.readableBytesView))
    }
}

/// A duration in milliseconds, as the many-objects rows print them.
private func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}
