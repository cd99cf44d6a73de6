// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol

/// What an observer that outlives connections to the daemon receives, decided per notification. Pure.
///
/// Across a reconnection the observer sees `loadingStatus` go to `loading` (the link is down) and back to
/// `loaded` once the daemon confirms the data, and never a snapshot older than, or the same data again as,
/// one it already received: a re-observation's cached (`local`) copy of what it has is not passed on, a
/// newer version is, and so are deletions and resync notices.
public struct ResumeFilter: Sendable {
    public private(set) var last: ObjectChangedParams?

    public init() {}

    /// What goes to the observer for `change`, if anything: the change itself, or for a re-observation's
    /// `unchanged` notice (the version it holds is confirmed) the snapshot it holds with the notice's statuses,
    /// when they are news. What is passed becomes the last one delivered.
    public mutating func pass(_ change: ObjectChangedParams) -> ObjectChangedParams? {
        guard change.unchanged == true else { return admit(change) ? change : nil }
        guard var confirmed = last, confirmed.snapshot != nil else { return nil }
        guard confirmed.dataStatus != change.dataStatus || confirmed.loadingStatus != change.loadingStatus || confirmed.error != nil else {
            return nil
        }
        confirmed.token = change.token
        confirmed.dataStatus = change.dataStatus
        confirmed.loadingStatus = change.loadingStatus
        confirmed.error = nil
        confirmed.resync = nil
        last = confirmed
        return confirmed
    }

    /// The version to re-observe from (`sinceVersion`): the last snapshot delivered, when it was the cloud's
    /// data (a pending write's state is not: how the write ends must be told whatever its version).
    public var resumeVersion: Int64? {
        guard let last, let snapshot = last.snapshot, last.pendingWrites != true else { return nil }
        return snapshot.version
    }

    /// Whether `change` (not an `unchanged` notice: see ``pass(_:)``) goes to the observer (and, if so, it
    /// becomes the last one delivered).
    public mutating func admit(_ change: ObjectChangedParams) -> Bool {
        guard let last else {
            self.last = change
            return true
        }
        let version = change.snapshot?.version ?? 0
        let lastVersion = last.snapshot?.version ?? 0
        let deliver: Bool
        if change.resync == true {
            deliver = true
        } else if change.pendingWrites == true || last.pendingWrites == true {
            // A local write shows at once (with the version it applies to), and so does how it ends: the
            // cloud's version, or the confirmed data back after a rejection.
            deliver = version >= lastVersion || change.snapshot == nil
        } else if change.snapshot == nil {
            // Nothing cached yet after a restart is not news; a confirmed absence is (a deletion, or the end of the
            // loading of an object that does not exist), once.
            deliver = change.loadingStatus != .loading && (last.snapshot != nil || change.loadingStatus != last.loadingStatus)
        } else if version != lastVersion {
            deliver = version > lastVersion
        } else {
            // The same data: only the end of the loading, once.
            deliver = change.loadingStatus != .loading && change.loadingStatus != last.loadingStatus
        }
        if deliver { self.last = change }
        return deliver
    }

    /// The connection was lost: the notification to give the observer (its data, now `loading`), if any.
    public mutating func disconnected() -> ObjectChangedParams? {
        guard var change = last, change.loadingStatus != .loading else { return nil }
        change.loadingStatus = .loading
        change.resync = nil
        last = change
        return change
    }
}
