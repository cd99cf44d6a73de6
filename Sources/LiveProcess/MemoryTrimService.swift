// Licensed under the Apache License, Version 2.0.

import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

/// glibc's `malloc_trim(3)` (not in Swift's Glibc module): returns the free memory of every arena.
@_silgen_name("malloc_trim")
private func mallocTrim(_ pad: Int) -> CInt

/// When to give freed memory back to the kernel: once the process, busy since it last did, has been idle for
/// `idleFor` (under `idleShare` of a core). Pure; ``MemoryTrimService`` samples the CPU time and acts.
///
/// A burst allocates hundreds of megabytes (the daemon's queued notifications, chunks and encoder buffers; the
/// cloud's requests, connections and query results) and frees them when it is over, but glibc keeps freed memory
/// in its arenas (one per thread that allocated, up to 8 per core): the daemon's RSS stayed at its peak (618 MiB
/// after six bursts, idle 38 MiB), the cloud's at twice its idle size. `malloc_trim(0)` hands the free pages of
/// every arena back; it walks them, so it runs once per quiet spell, never while the process works.
package struct IdleTrimPolicy: Sendable, Equatable {
    var idleShare = 0.02
    var idleFor: Duration = .seconds(2)
    private(set) var busySinceTrim = false
    private(set) var idleSince: ContinuousClock.Instant?

    package init() {}

    /// The CPU share of the last interval, sampled at `now`; whether to trim now.
    package mutating func sample(cpuShare: Double, at now: ContinuousClock.Instant) -> Bool {
        guard cpuShare < idleShare else {
            busySinceTrim = true
            idleSince = nil
            return false
        }
        let since = idleSince ?? now
        idleSince = since
        guard busySinceTrim, now - since >= idleFor else { return false }
        busySinceTrim = false
        return true
    }
}

/// Samples the process's CPU time every second and trims the allocator's free memory when
/// ``IdleTrimPolicy`` says so; logs (debug) what it gave back.
package struct MemoryTrimService: Service, CustomStringConvertible {
    let logger: Logger
    var interval: Duration = .seconds(1)

    package init(logger: Logger) {
        self.logger = logger
    }

    package var description: String { "MemoryTrimService" }

    package func run() async throws {
        var policy = IdleTrimPolicy()
        var lastCPU = Self.cpuSeconds()
        var lastAt = ContinuousClock.now
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await cancelWhenGracefulShutdown { try? await Task.sleep(for: interval) }
            let now = ContinuousClock.now
            let cpu = Self.cpuSeconds()
            let elapsed = Double((now - lastAt).components.seconds) + Double((now - lastAt).components.attoseconds) / 1e18
            let share = elapsed > 0 ? (cpu - lastCPU) / elapsed : 0
            (lastCPU, lastAt) = (cpu, now)
            guard policy.sample(cpuShare: share, at: now) else { continue }
            let before = Self.residentKiB()
            _ = mallocTrim(0)
            logger.debug("returned free memory to the kernel", metadata: ["rssKiBBefore": "\(before)", "rssKiBAfter": "\(Self.residentKiB())"])
        }
    }

    /// The CPU time the process used, user and system, in seconds.
    static func cpuSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// The resident set size, from /proc/self/statm, in KiB.
    static func residentKiB() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }
}
