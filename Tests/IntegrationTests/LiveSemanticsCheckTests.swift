// Licensed under the Apache License, Version 2.0.

import Foundation
import Testing

/// The live-semantics checker (``LiveSemanticsChecker``): random schedules of writes and faults, every
/// notification checked against the protocol's promises and every settled state against the checker's own
/// model of the cloud's data. Seeded: `LIVEGATE_CHECK_SEED` repeats a schedule (as far as timing allows),
/// `LIVEGATE_CHECK_SECONDS` sets its length (default 40; `scripts/live-check` runs long ones),
/// `LIVEGATE_CHECK_FAULTS` (comma-separated ``LiveSemanticsChecker/Fault`` names) the faults it draws from.
///
/// Not part of the default suite, whose tests are examples of fixed length: it runs when
/// `LIVEGATE_CHECK_SECONDS` is set, for 60 s with a fixed seed in CI (`.ci/run`), for as long as one likes
/// with `scripts/live-check`.
@Suite(.serialized) struct LiveSemanticsCheckTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["LIVEGATE_CHECK_SECONDS"] != nil))
    func liveSemanticsHoldUnderRandomSchedulesOfFaults() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["LIVEGATE_CHECK_SECONDS"].flatMap(Int.init) ?? 40
        let seed = environment["LIVEGATE_CHECK_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1..<(1 << 53))
        var checker = LiveSemanticsChecker(seed: seed, duration: .seconds(seconds))
        if let names = environment["LIVEGATE_CHECK_FAULTS"], !names.isEmpty {
            checker.faults = try names.split(separator: ",").map { name in
                guard let fault = LiveSemanticsChecker.Fault(rawValue: String(name)) else {
                    throw CheckFailure("LIVEGATE_CHECK_FAULTS: no fault \(name); there are \(LiveSemanticsChecker.Fault.allCases.map(\.rawValue))")
                }
                return fault
            }
        }
        let (figures, violations, log) = try await checker.run()
        print("live semantics check, seed \(seed) (LIVEGATE_CHECK_SEED=\(seed)): \(figures), \(violations.count) violations")
        if let first = violations.first {
            let path = NSTemporaryDirectory() + "livegate-check-\(seed).trace"
            try? log.fullTrace.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let subjects = first.split(separator: " ").prefix(3).map(String.init).filter {
                $0.hasPrefix("t") || $0.hasPrefix("c") || $0.hasPrefix("i")
            }
            let trace = log.trace(mentioning: subjects.map { $0.trimmingCharacters(in: .punctuationCharacters) })
            Issue.record(
                "seed \(seed) (LIVEGATE_CHECK_SEED=\(seed)): \(violations.count) violations (whole trace: \(path)); first: \(first)\ntrace:\n\(trace.joined(separator: "\n"))\nall:\n\(violations.prefix(20).joined(separator: "\n"))"
            )
        }
    }
}
