// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Every write the checker made, and what the cloud's versions must show of them: each acknowledged write
/// applied exactly once. From the protocols alone: an object's `version` grows by one with every write applied
/// to it, its deletion included (Protocol/cloud, *Objects*), and a write the daemon acknowledged is applied
/// once, across retries and its own restarts (Protocol/ipc, *Local first, through a durable outbox*).
///
/// Between two settled states, the versions an object went up by must be at least the writes known applied
/// (acknowledged by the daemon, or answered by the cloud to the remote writer) and at most those plus the
/// writes whose outcome is unknown (a request to the daemon whose answer was lost with its connection, a
/// remote write the cloud never answered through its retries): fewer is a lost write, more a write applied
/// twice. A deleted object shows no version: its writes are counted on until it is seen again.
final class WriteLedger: Sendable {
    private struct Counts {
        var known = 0
        var unknown = 0
    }

    private struct State {
        var base: [String: Int64] = [:]
        var counts: [String: Counts] = [:]
    }

    private let state = Mutex(State())

    /// The daemon acknowledged a write, or the cloud answered one of the remote writer's as applied.
    func applied(_ id: String) { state.withLock { $0.counts[id, default: Counts()].known += 1 } }

    /// A write that may or may not have been applied.
    func unknown(_ id: String) { state.withLock { $0.counts[id, default: Counts()].unknown += 1 } }

    /// Compares the objects' versions now (those that exist) with the writes counted since the last
    /// comparison; returns what does not fit. The first comparison only takes the versions as its base.
    func check(versions: [String: Int64]) -> [String] {
        state.withLock { state in
            var violations: [String] = []
            for (id, version) in versions.sorted(by: { $0.key < $1.key }) {
                defer {
                    state.base[id] = version
                    state.counts[id] = nil
                }
                guard let base = state.base[id] else { continue }
                let counts = state.counts[id] ?? Counts()
                let grown = Int(version - base)
                if grown < counts.known {
                    violations.append(
                        "\(id): a write was lost: v\(base) → v\(version) (\(grown) writes applied) after \(counts.known) acknowledged writes (and \(counts.unknown) of unknown outcome)"
                    )
                } else if grown > counts.known + counts.unknown {
                    violations.append(
                        "\(id): a write was applied twice: v\(base) → v\(version) (\(grown) writes applied) after \(counts.known) acknowledged writes and \(counts.unknown) of unknown outcome"
                    )
                }
            }
            return violations
        }
    }
}
