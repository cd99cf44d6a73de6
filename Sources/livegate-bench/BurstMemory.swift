// Licensed under the Apache License, Version 2.0.

import Foundation

extension Bench {
    /// The daemon's resident memory across bursts: `subscribers` clients observe one object; each burst sends
    /// `rate` updates/s for `seconds` (more than they read: queues fill, coalesce, some clients may be cut
    /// off), then everything is quiet for 10 s. Prints, per burst, the RSS before it, its peak (sampled every
    /// 100 ms) and 10 s after it, against the RSS before the first burst; then the RSS 10 s after the clients
    /// left.
    func measureBurstMemory(_ daemon: DaemonProcess, subscribers count: Int, bursts: Int, publish: @escaping @Sendable () -> Void) async throws {
        let pool = try await connectSubscribers(count, to: daemon)
        try await Task.sleep(for: .seconds(3))
        let baseline = daemon.child.residentKiB
        say("burst memory: \(count) subscribers, \(bursts) bursts of \(rate) updates/s for \(seconds) s, 10 s quiet after each")
        say("")
        say("| burst | RSS before | peak | 10 s after | after / first before |")
        say("| ---: | ---: | ---: | ---: | ---: |")
        for burst in 1...bursts {
            let before = daemon.child.residentKiB
            var peak = before
            let total = Int(Double(rate) * seconds)
            let start = ContinuousClock.now
            var nextSample = start
            var sent = 0
            while sent < total {
                let elapsed = ContinuousClock.now - start
                let due = min(
                    total,
                    Int(Double(elapsed.components.seconds) * Double(rate) + Double(elapsed.components.attoseconds) / 1e18 * Double(rate)) + 1
                )
                while sent < due {
                    publish()
                    sent += 1
                }
                if ContinuousClock.now >= nextSample {
                    peak = max(peak, daemon.child.residentKiB)
                    nextSample = .now + .milliseconds(100)
                }
                try await Task.sleep(for: .microseconds(200))
            }
            // Until the clients have what reaches them, still sampling the peak.
            var lastDeliveries = -1
            while true {
                let deliveries = pool.receptions.reduce(0) { $0 + $1.deliveries }
                peak = max(peak, daemon.child.residentKiB)
                if deliveries == lastDeliveries { break }
                lastDeliveries = deliveries
                try await Task.sleep(for: .milliseconds(500))
            }
            try await Task.sleep(for: .seconds(10))
            let after = daemon.child.residentKiB
            say(
                "| \(burst) | \(before / 1024) MiB | \(peak / 1024) MiB | \(after / 1024) MiB | "
                    + "\(String(format: "%.2f", Double(after) / Double(max(1, baseline))))× |"
            )
        }
        await pool.close()
        try await Task.sleep(for: .seconds(10))
        say("")
        say("burst memory: \(baseline / 1024) MiB before the first burst, \(daemon.child.residentKiB / 1024) MiB 10 s after the clients left")
    }
}
