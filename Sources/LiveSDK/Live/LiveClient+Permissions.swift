// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import Logging
import NIOCore
import Synchronization

/// What the engine learnt of the cloud's permissions for the session's user.
struct CollectionPermissions {
    var readable: Set<String> = []
    var refusals: [String: LiveError] = [:]
    var probes: [String: Task<LiveError?, Never>] = [:]
    /// Collections whose question got no answer on this realtime connection: not asked again until it is made
    /// again (or a read teaches the answer).
    var unanswered: Set<String> = []
}

extension LiveClient {
    /// Whether the cloud lets the session's user read `collection` (its objects and queries): throws
    /// ``LiveError`` `notPermitted` when the cloud refused, so that an observation it would refuse fails at
    /// once rather than living on as a token that only ever reports the refusal.
    ///
    /// What the engine learnt stands until the realtime connection is made again (the cloud's permissions
    /// may have changed meanwhile): each fetch says so, and when nothing did yet, the cloud's access check
    /// (`GET /v1/collections/{collection}/access`, which reads nothing) asks, once for every caller
    /// meanwhile, waiting at most ``readabilityQuestionTimeout``. Nothing is asked while the realtime connection
    /// is down, and a question that fails answers nothing: the observation's own fetch reports why, and the
    /// collection is not asked about again until the connection is made again (a cloud that stopped answering
    /// without closing would otherwise hold every observation of it, one after another, for the whole timeout:
    /// cached copies included).
    ///
    /// A collection known to be readable is answered where the caller runs, with no hop to the engine's loop
    /// (every observation asks: a burst of thousands paid two hops apiece).
    public nonisolated func checkReadable(collection: String) async throws(LiveError) {
        if knownReadable.withLock({ $0.contains(collection) }) { return }
        try await checkReadableOnEngine(collection)
    }

    private func checkReadableOnEngine(_ collection: String) async throws(LiveError) {
        if let refusal = permissions.refusals[collection] { throw refusal }
        guard !permissions.readable.contains(collection), !permissions.unanswered.contains(collection), connectionStatus == .connected
        else { return }
        let probe: Task<LiveError?, Never>
        if let running = permissions.probes[collection] {
            probe = running
        } else {
            probe = Task { await self.askReadable(collection) }
            permissions.probes[collection] = probe
        }
        if let refusal = await probe.value { throw refusal }
    }

    /// How long a readability question may wait for the cloud: it holds the observations that ask, cached
    /// copies included, and the cloud answers it without reading anything.
    static let readabilityQuestionTimeout: TimeAmount = .seconds(2)

    private func askReadable(_ collection: String) async -> LiveError? {
        defer { permissions.probes[collection] = nil }
        do {
            let access = try await withSession { token throws(LiveError) in
                try await cloud.access(collection, token: token, timeout: Self.readabilityQuestionTimeout)
            }
            guard access.read else {
                let refusal = LiveError(
                    code: .notPermitted,
                    message:
                        "the cloud does not let \(session.username) read the collection \(collection)"
                )
                readOutcome(collection, refusal)
                return refusal
            }
            readOutcome(collection, nil)
            return nil
        } catch {
            permissions.unanswered.insert(collection)
            logger.notice(
                "the cloud did not answer whether the collection is readable: its observations go on without asking until the realtime connection is made again",
                metadata: ["collection": "\(collection)", "error": "\(error)"]
            )
            return nil
        }
    }

    /// What a read of `collection` taught: allowed (`nil`), refused (`notPermitted`), or nothing (another
    /// failure).
    func readOutcome(_ collection: String, _ error: LiveError?) {
        switch error?.code {
        case nil:
            permissions.refusals[collection] = nil
            permissions.readable.insert(collection)
            knownReadable.withLock { _ = $0.insert(collection) }
        case .notPermitted?:
            permissions.readable.remove(collection)
            knownReadable.withLock { _ = $0.remove(collection) }
            permissions.refusals[collection] = error
        default:
            break
        }
    }

    /// The realtime connection was made again: the cloud's permissions may have changed while it was down.
    func forgetReadability() {
        permissions.unanswered.removeAll()
        permissions.readable.removeAll()
        knownReadable.withLock { $0.removeAll() }
        permissions.refusals.removeAll()
    }
}
