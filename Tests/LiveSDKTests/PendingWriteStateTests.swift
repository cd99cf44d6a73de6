// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

private let key = EntityKey(collection: "notes", id: "n1")

private func entity(_ version: Int64, _ data: JSONValue, deleted: Bool = false) -> Entity {
    Entity(collection: "notes", id: "n1", version: version, data: data, createdAt: "c", updatedAt: "u\(version)", deleted: deleted)
}

/// Writes of this host in the pure object state machine: shown at once and marked pending, kept over
/// remote changes, then confirmed (the cloud's version) or rolled back (with the error).
@Suite struct PendingWriteStateTests {
    func started(_ cached: Entity?) -> LiveObjectState {
        var state = LiveObjectState(key: key)
        _ = state.started(cached: cached, fetching: false)
        _ = cached.map { state.fetchSucceeded($0) }
        return state
    }

    @Test func aLocalWriteShowsAtOnceMarkedPendingThenTheConfirmationBringsTheCloudsVersion() throws {
        var state = started(entity(1, ["a": 1]))
        let pendingEmitted = state.localWrite(7, .merge(["b": 2]))
        let pending = try #require(pendingEmitted)
        #expect(pending.pendingWrites)
        #expect(pending.snapshot?.data == ["a": 1, "b": 2])
        #expect(pending.snapshot?.version == 1, "the version the write applies to")
        #expect(pending.dataStatus == .fresh)

        let confirmedEmitted = state.writeConfirmed(7, entity(2, ["a": 1, "b": 2]))
        let confirmed = try #require(confirmedEmitted)
        #expect(!confirmed.pendingWrites)
        #expect(confirmed.snapshot?.version == 2)
        #expect(state.pending.isEmpty)
    }

    @Test func pendingWritesStayAppliedOverRemoteChangesInTheirOrder() throws {
        var state = started(entity(1, ["a": 1]))
        _ = state.localWrite(1, .merge(["mine": true]))
        _ = state.localWrite(2, .merge(["a": 9]))
        let remoteEmitted = state.remoteChanged(entity(2, ["a": 5, "theirs": true]))
        let remote = try #require(remoteEmitted)
        #expect(remote.snapshot?.data == ["a": 9, "theirs": true, "mine": true], "both local writes, in order, over the remote change")
        #expect(remote.snapshot?.version == 2)
        #expect(remote.pendingWrites)
        // The first is confirmed; the second still shows.
        let firstConfirmed = state.writeConfirmed(1, entity(3, ["a": 5, "theirs": true, "mine": true]))
        #expect(firstConfirmed?.pendingWrites == true)
        #expect(firstConfirmed?.snapshot?.data == ["a": 9, "theirs": true, "mine": true])
    }

    @Test func aRejectedWriteIsRolledBackWithTheError() throws {
        var state = started(entity(3, ["a": 1]))
        _ = state.localWrite(4, .replace(["a": 2]))
        let conflict = LiveError(code: .versionConflict, message: "notes/n1 is at version 3, not 2", currentVersion: 3)
        let rolledBackEmitted = state.writeRejected(4, conflict)
        let rolledBack = try #require(rolledBackEmitted)
        #expect(rolledBack.snapshot?.data == ["a": 1])
        #expect(rolledBack.snapshot?.version == 3)
        #expect(!rolledBack.pendingWrites)
        #expect(rolledBack.error == conflict)
    }

    @Test func aWriteConfirmedDuringACatchUpEndsItsSilenceSoTheReplayAfterItIsToldVersionByVersion() throws {
        var state = LiveObjectState(key: key)
        _ = state.started(cached: entity(3, ["a": 1]), fetching: false)
        state.resumeStarted()
        _ = state.localWrite(1, .replace(["a": 2]))
        let confirmation = state.writeConfirmed(1, entity(5, ["a": 2]))
        let confirmed = try #require(confirmation)
        #expect(confirmed.snapshot?.version == 5 && !confirmed.pendingWrites)
        // The replay goes on past the confirmation: each later version is told, none skipped.
        let next = state.remoteChanged(entity(6, ["a": 3]))
        #expect(next?.snapshot?.version == 6, "the replay after the confirmation, told as it comes")
        #expect(state.caughtUp() == nil, "nothing new at the end of the replay")
    }

    @Test func aPendingCreateAndAPendingDelete() throws {
        var state = started(nil)
        let createdEmitted = state.localWrite(1, .replace(["new": true]))
        let created = try #require(createdEmitted)
        #expect(created.snapshot?.data == ["new": true] && created.snapshot?.version == 0 && created.pendingWrites)
        #expect(created.dataStatus == .local, "not confirmed by the cloud")
        let deletedEmitted = state.localWrite(2, .delete)
        let deleted = try #require(deletedEmitted)
        #expect(deleted.snapshot == nil && deleted.dataStatus == .notExist && deleted.pendingWrites)
        // The same write told twice (read from the outbox, and enqueued) counts once.
        #expect(state.localWrite(2, .delete) == nil)
        #expect(state.pending.count == 2)
    }
}
