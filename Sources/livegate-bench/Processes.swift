// Licensed under the Apache License, Version 2.0.

import Foundation
import NIOCore
import NIOPosix

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child process the benchmark runs (the daemon, the cloud, redis-server), stopped when done.
final class Child: Sendable {
    let process: Process
    let name: String

    init(_ name: String, _ executable: String, _ arguments: [String], log: String, stdout: Pipe? = nil) throws {
        self.name = name
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        guard FileManager.default.createFile(atPath: log, contents: nil), let logHandle = FileHandle(forWritingAtPath: log) else {
            throw BenchError("cannot create \(name)'s log \(log)")
        }
        process.standardError = logHandle
        process.standardOutput = stdout ?? logHandle
        do {
            try process.run()
        } catch {
            throw BenchError("cannot start \(name) (\(executable)): \(error)")
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// Resident memory in KiB, from /proc.
    var residentKiB: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    /// CPU time used so far (user + system), in seconds, from /proc.
    var cpuSeconds: Double { Self.cpuSeconds(process: String(pid)) }

    /// CPU time used so far by a process (`self`: this one), in seconds, from /proc.
    static func cpuSeconds(process: String) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        // After the command's closing parenthesis: state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A clock of this process's CPU time from now on (see ``CPUClock``).
    var cpuClock: CPUClock { CPUClock(pid: pid) }

    /// Asks the process to stop (SIGTERM), and kills it if it has not within 5 s. (Children inherit the
    /// benchmark's signal mask, in which the runtime's threads block SIGTERM: redis-server never saw it and
    /// the benchmark hung here at its end.)
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Waits until something accepts connections on the Unix socket at `path`.
func waitForSocket(_ path: String, what: String, timeout: Duration = .seconds(30)) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(unixDomainSocketPath: path).get()
        {
            try? await channel.close()
            return
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw BenchError("\(what) did not listen on \(path) within \(timeout)")
}

/// Reads lines from a pipe until one contains `marker`; returns it.
func awaitLine(_ pipe: Pipe, containing marker: String, timeout: Duration = .seconds(30)) async throws -> String {
    let handle = pipe.fileHandleForReading
    return try await withThrowingTaskGroup(of: String.self) { group in
        group.addTask {
            var buffer = ""
            while true {
                let data = handle.availableData
                if data.isEmpty { throw BenchError("the process closed its output before printing \(marker)") }
                buffer += String(decoding: data, as: UTF8.self)
                if let line = buffer.split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
            }
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw BenchError("timed out waiting for \(marker)")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// A process's CPU time from the moment the clock was made, thread by thread from the scheduler's own count
/// (`/proc/PID/task/TID/schedstat`, nanoseconds). `/proc/PID/stat` counts 10 ms ticks: a microsecond an object
/// over 10,000 objects, coarser than the differences the many-objects rows compare. A thread that ends
/// meanwhile takes its time with it (the daemon's threads live as long as it does; the idle threads of the
/// pool that end do so after seconds asleep, so with little or nothing of the span measured).
struct CPUClock {
    let pid: Int32
    /// Which of schedstat's counts: 0 the time on a CPU, 1 the time runnable but waiting for one.
    private let field: Int
    /// Only these threads (their ids), or all of them.
    private let threads: Set<Substring>?
    private let start: [Substring: UInt64]

    init(pid: Int32) {
        self.init(pid: pid, field: 0)
    }

    /// A clock of the CPU time of some threads of this process (their ids), such as an event loop group's
    /// (``threadIDs(of:)``).
    init(threads: [Int32]) {
        self.init(pid: getpid(), field: 0, threads: Set(threads.map { Substring(String($0)) }))
    }

    private init(pid: Int32, field: Int, threads: Set<Substring>? = nil) {
        self.pid = pid
        self.field = field
        self.threads = threads
        start = Self.perThread(pid, field: field, threads: threads)
    }

    /// The same clock started again now.
    func restarted() -> CPUClock { CPUClock(pid: pid, field: field, threads: threads) }

    /// A clock of the time the process's threads spent runnable, waiting for a CPU (schedstat's run-queue wait):
    /// what an oversubscribed machine adds to a request's latency.
    static func runQueueWait(pid: Int32) -> CPUClock { CPUClock(pid: pid, field: 1) }

    /// Nanoseconds of the count so far, by thread id.
    private static func perThread(_ pid: Int32, field: Int, threads only: Set<Substring>? = nil) -> [Substring: UInt64] {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [:] }
        var times: [Substring: UInt64] = [:]
        for thread in threads where only?.contains(Substring(thread)) ?? true {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8),
                case let counts = stat.split(separator: " "), counts.count > field, let nanoseconds = UInt64(counts[field])
            else { continue }
            times[Substring(thread)] = nanoseconds
        }
        return times
    }

    /// Seconds of the count since the clock was made, over every thread alive now (one born since counts from zero).
    var seconds: Double {
        let now = Self.perThread(pid, field: field, threads: threads)
        let nanoseconds = now.reduce(UInt64(0)) { sum, thread in sum + (thread.value &- (start[thread.key] ?? 0)) }
        return Double(nanoseconds) / 1e9
    }
}

/// The thread ids of an event loop group's loops (each asked on its own thread: `/proc/thread-self` names it).
func threadIDs(of group: MultiThreadedEventLoopGroup) async throws -> [Int32] {
    var ids: [Int32] = []
    for loop in group.makeIterator() {
        let link = try await loop.submit { try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") }.get()
        guard let id = link.split(separator: "/").last.flatMap({ Int32($0) }) else { throw BenchError("no thread id in /proc/thread-self (\(link))") }
        ids.append(id)
    }
    return ids
}
