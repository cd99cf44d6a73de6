// Licensed under the Apache License, Version 2.0.

import NIOCore
import Synchronization
import Testing

@testable import LiveGateDaemon

@Suite struct ConnectionOutboxTests {
    func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func responsesAndNotificationsKeepTheirOrder() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.offer(token: 1, prefix: buffer("p1:"), body: buffer("b1\n"))
        outbox.enqueue(buffer("r2\n"))
        let batch = outbox.take().buffers
        #expect(batch.map { String(buffer: $0) } == ["r1\n", "p1:", "b1\n", "r2\n"])
    }

    @Test func aClientThatKeepsUpGetsEveryNotification() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        #expect(outbox.take().buffers.map { String(buffer: $0) } == ["t1:", "v1\n", "t1:", "v2\n"])
        #expect(outbox.coalescedCount == 0)
    }

    @Test func onceBehindUnsentNotificationsOfATokenCoalesceToTheLatest() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.writerBlocked()  // the client's socket is full
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.offer(token: 2, prefix: buffer("t2:"), body: buffer("v1\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v3\n"))
        let batch = outbox.take().buffers
        #expect(batch.map { String(buffer: $0) } == ["t1:", "v3\n", "t2:", "v1\n"])
        #expect(outbox.coalescedCount == 2)
        // After a batch is taken, a new notification of the token is queued again.
        outbox.writerUnblocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v4\n"))
        #expect(outbox.take().buffers.map { String(buffer: $0) } == ["t1:", "v4\n"])
    }

    @Test func notificationsQueuedBeforeFallingBehindCoalesceToo() {
        // The index by token is built only once the client is behind, from what is queued then.
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.append(token: 2, prefix: buffer("s2:"), body: buffer("m1\n"))  // a stream message: never replaced
        outbox.offer(token: 3, prefix: buffer("t3:"), body: buffer("v1\n"))
        outbox.writerBlocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        outbox.append(token: 2, prefix: buffer("s2:"), body: buffer("m2\n"))
        #expect(
            outbox.take().buffers.map { String(buffer: $0) } == ["t1:", "v2\n", "s2:", "m1\n", "t3:", "v1\n", "s2:", "m2\n"]
        )
        #expect(outbox.coalescedCount == 1)
    }

    @Test func aChangeThatReplacesAnUnsentOneIsSentAsFullState() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        let full: ConnectionOutbox.FullState = { ByteBuffer(string: "full\n") }
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change1\n"), fullState: full)
        #expect(outbox.take().buffers.map { String(buffer: $0) } == ["t1:", "change1\n"], "alone, a change goes as it is")
        outbox.writerBlocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change2\n"), fullState: full)
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change3\n"), fullState: full)
        #expect(outbox.take().buffers.map { String(buffer: $0) } == ["t1:", "full\n"], "merged changes become the full state")
    }

    @Test func overTheByteLimitTheClientIsCutOffWithOneClosingNotification() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 100, maxStall: .seconds(30))
        for token in 1...20 { outbox.offer(token: Int64(token), prefix: buffer("p:"), body: buffer("0123456789\n")) }
        #expect(outbox.wasCutOff)
        let batch = outbox.take().buffers
        #expect(batch.count == 1)
        let text = batch.first.map { String(buffer: $0) } ?? ""
        #expect(text.contains("\"method\":\"connection.closing\""))
        #expect(text.contains("-32003"))
        outbox.offer(token: 99, prefix: buffer("p:"), body: buffer("late\n"))
        let after = outbox.take()
        #expect(after.buffers.isEmpty && after.finished, "nothing is accepted after the cut-off; the writer ends")
    }

    @Test func aWriterStuckLongerThanTheStallLimitIsCutOff() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .zero)
        outbox.offer(token: 1, prefix: buffer("p:"), body: buffer("a\n"))
        #expect(!outbox.wasCutOff, "an idle writer is not stalled")
        _ = outbox.take()
        outbox.writerBlocked()  // the client's socket is full, and (in this test) stays so
        outbox.offer(token: 1, prefix: buffer("p:"), body: buffer("b\n"))
        #expect(outbox.wasCutOff)
    }

    @Test func closeDrainsWhatIsQueuedThenEnds() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.close(final: buffer("bye\n"))
        let last = outbox.take()
        #expect(last.buffers.map { String(buffer: $0) } == ["r1\n", "bye\n"] && last.finished)
    }

    @Test func whatWasQueuedBeforeTheWriterStartedWakesItAtOnce() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.close(final: buffer("refused\n"))
        let wakeups = Mutex(0)
        outbox.setWakeup { wakeups.withLock { $0 += 1 } }
        #expect(wakeups.withLock { $0 } == 1)
        let batch = outbox.take()
        #expect(batch.buffers.map { String(buffer: $0) } == ["refused\n"] && batch.finished)
    }

    @Test func theWriterIsWokenOnceUntilItTakesTheQueue() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        let wakeups = Mutex(0)
        outbox.setWakeup { wakeups.withLock { $0 += 1 } }
        outbox.offer(token: 7, prefix: buffer("p:"), body: buffer("a\n"))
        outbox.enqueue(buffer("r\n"))
        #expect(wakeups.withLock { $0 } == 1, "items queued while a wake-up is pending do not wake again")
        #expect(outbox.take().buffers.count == 3)
        outbox.offer(token: 7, prefix: buffer("p:"), body: buffer("b\n"))
        #expect(wakeups.withLock { $0 } == 2)
        outbox.close()
        #expect(wakeups.withLock { $0 } == 2, "the pending wake-up covers the close too")
        #expect(outbox.take().finished)
    }
}
