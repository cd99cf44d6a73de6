// Licensed under the Apache License, Version 2.0.

import Synchronization

/// Whether each file of the state directory is failing, and which event a write's outcome makes: the
/// first failure of a file (or a failure of another kind), and its recovery, are events; the repeats in
/// between are only counted (a full disk fails every realtime event's cache write; the log says it once).
public struct StorageHealth: Sendable, Equatable {
    public enum Event: Sendable, Equatable {
        /// The file started failing with `fault` (or failed differently than before).
        case failing(file: String, fault: StorageFault, message: String)
        /// The file works again, after `failures` failed operations.
        case recovered(file: String, fault: StorageFault, failures: Int)
    }

    /// The failing files: their fault and how many operations failed since it started.
    public private(set) var failing: [String: (fault: StorageFault, failures: Int)] = [:]

    public init() {}

    /// An operation on `file` failed with `fault`.
    public mutating func failed(_ file: String, _ fault: StorageFault, message: String) -> Event? {
        if let current = failing[file], current.fault == fault {
            failing[file] = (fault, current.failures + 1)
            return nil
        }
        failing[file] = (fault, 1)
        return .failing(file: file, fault: fault, message: message)
    }

    /// An operation on `file` succeeded.
    public mutating func succeeded(_ file: String) -> Event? {
        // Nearly always nothing is failing: no hash of the path then (every realtime event's cache write succeeds).
        guard !failing.isEmpty, let current = failing.removeValue(forKey: file) else { return nil }
        return .recovered(file: file, fault: current.fault, failures: current.failures)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.failing.mapValues { "\($0.fault):\($0.failures)" } == rhs.failing.mapValues { "\($0.fault):\($0.failures)" }
    }
}

/// The state directory's ``StorageHealth``, shared by the cache and the outbox, and who hears of its events.
package final class StorageMonitor: Sendable {
    private let state = Mutex((health: StorageHealth(), observers: [Int: @Sendable (StorageHealth.Event) -> Void](), next: 0))

    package init() {}

    /// The error for `error`, thrown while `doing` something with `path`; a storage fault is recorded.
    func failure(_ error: any Error, doing: String, path: String) -> LiveError {
        let liveError = LiveError.storage(error, doing: doing, path: path)
        if let fault = StorageFault(liveError.code) {
            report { $0.failed(path, fault, message: liveError.message) }
        }
        return liveError
    }

    /// An operation on `path` succeeded (cheap when nothing was failing).
    func success(_ path: String) {
        report { $0.succeeded(path) }
    }

    func addObserver(_ observer: @escaping @Sendable (StorageHealth.Event) -> Void) -> Int {
        state.withLock { state in
            state.next += 1
            state.observers[state.next] = observer
            return state.next
        }
    }

    func removeObserver(_ id: Int) { state.withLock { _ = $0.observers.removeValue(forKey: id) } }

    var health: StorageHealth { state.withLock { $0.health } }

    private func report(_ change: (inout StorageHealth) -> StorageHealth.Event?) {
        let (event, observers) = state.withLock { state -> (StorageHealth.Event?, [@Sendable (StorageHealth.Event) -> Void]) in
            guard let event = change(&state.health) else { return (nil, []) }
            return (event, Array(state.observers.values))
        }
        guard let event else { return }
        for observer in observers { observer(event) }
    }
}
