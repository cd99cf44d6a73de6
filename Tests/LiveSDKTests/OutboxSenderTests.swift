// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// The outbox's sender without a file or a socket: the order of what each outcome asks for, the writes that
/// stay queued, and those that ended but could not leave the outbox.
@Suite struct OutboxSenderTests {
    static let entity = Entity(collection: "notes", id: "n1", version: 3, data: ["text": "hi"], createdAt: "t", updatedAt: "t", deleted: false)

    @Test func aConfirmedWriteIsStoredBeforeItLeavesTheOutboxAndThenTold() {
        var sender = OutboxSender()
        #expect(sender.sent(7, .confirmed(Self.entity)) == [.store(Self.entity), .remove(7), .confirm(7, Self.entity)])
        #expect(sender.last == 7, "the next write sent is the first queued after it")
    }

    @Test func aRejectedWriteLeavesTheOutboxAndIsTold() {
        var sender = OutboxSender()
        let conflict = LiveError(code: .versionConflict, message: "v4 is stored")
        #expect(OutboxSender.Outcome.failed(conflict) == .rejected(conflict))
        #expect(sender.sent(2, .failed(conflict)) == [.remove(2), .reject(2, conflict)])
        #expect(sender.last == 2)
    }

    /// The checker's `cloudKilled`, `cloudFailsRequests`, `cloudLosesWriteAnswers`: the write stays queued and
    /// is sent again, after a pause that grows with the failures in a row, until the cloud answers.
    @Test func aWriteTheCloudWasNotReachedForStaysQueued() {
        var sender = OutboxSender()
        let down = LiveError(code: .cloudUnavailable, message: "connection refused")
        #expect(OutboxSender.Outcome.failed(down) == .unreachable(down))
        #expect(OutboxSender.Outcome.failed(LiveError(code: .unauthenticated, message: "token expired")) != .rejected(down))
        #expect(sender.sent(5, .failed(down)) == [.pause(failures: 1)])
        #expect(sender.sent(5, .failed(down)) == [.pause(failures: 2)])
        #expect(sender.last == 0, "it is the next to send again")
        _ = sender.sent(5, .confirmed(Self.entity))
        #expect(sender.failures == 0)
        #expect(sender.sent(6, .failed(down)) == [.pause(failures: 1)], "a new run of failures")
    }

    /// A full disk: a write that ended but could not leave the outbox is neither sent again nor pending.
    @Test func aWriteThatEndedButCouldNotLeaveTheOutboxIsNotPending() {
        var sender = OutboxSender()
        _ = sender.sent(4, .confirmed(Self.entity))
        sender.removalFailed(4)
        #expect(!sender.isPending(4))
        #expect(sender.isPending(5))
        #expect(sender.doneButQueued == [4])
        sender.removed(4)
        #expect(sender.doneButQueued.isEmpty)
    }
}
