// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import Synchronization
import Testing

@Suite struct ConnectionOutboxTests {
    func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }
    func text(_ chunks: [ByteBuffer]) -> String { chunks.map { String(buffer: $0) }.joined() }

    @Test func responsesAndNotificationsKeepTheirOrder() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.offer(token: 1, prefix: buffer("p1:"), body: buffer("b1\n"))
        outbox.enqueue(buffer("r2\n"))
        #expect(text(outbox.take().chunks) == "r1\np1:b1\nr2\n")
    }

    @Test func aClientThatKeepsUpGetsEveryNotification() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        #expect(text(outbox.take().chunks) == "t1:v1\nt1:v2\n")
        #expect(outbox.coalescedCount == 0)
    }

    @Test func onceBehindUnsentNotificationsOfATokenCoalesceToTheLatest() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.writerBlocked()  // the client's socket is full
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.offer(token: 2, prefix: buffer("t2:"), body: buffer("v1\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v3\n"))
        #expect(text(outbox.take().chunks) == "t1:v3\nt2:v1\n")
        #expect(outbox.coalescedCount == 2)
        // After a batch is taken, a new notification of the token is queued again.
        outbox.writerUnblocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v4\n"))
        #expect(text(outbox.take().chunks) == "t1:v4\n")
    }

    @Test func aFanOutBatchForATokenBehindQueuesItsLatestAdmittedChange() {
        var bodies = SharedBodies()
        for version in 1...3 { bodies.append(buffer("v\(version)\n")) }
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.writerBlocked()
        outbox.offer(token: 2, prefix: buffer("t2:"), body: buffer("w1\n"))
        outbox.offerOnLoop(token: 1, prefix: buffer("t1:"), bodies: bodies)
        outbox.offerOnLoop(token: 2, prefix: buffer("t2:"), bodies: bodies, admitted: [0, 1])
        #expect(text(outbox.take().chunks) == "t2:v2\nt1:v3\n")
        #expect(outbox.coalescedCount == 4, "v1 and v2 of t1; w1 and v1 of t2")
        #expect(outbox.queuedBytes == 0)
        // Items waiting while the client no longer is behind: every change is queued, none replaced.
        outbox.offer(token: 3, prefix: buffer("t3:"), body: buffer("x\n"))
        outbox.writerUnblocked()
        outbox.offerOnLoop(token: 1, prefix: buffer("t1:"), bodies: bodies)
        #expect(text(outbox.take().chunks) == "t3:x\nt1:v1\nt1:v2\nt1:v3\n")
    }

    @Test func whatWasQueuedWhileKeepingUpIsWrittenAsItIsAndWhatFollowsCoalesces() {
        // While the client keeps up, bytes are copied into chunks as they come; once it is behind,
        // notifications queue after them as items, which coalesce per token.
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.append(token: 2, prefix: buffer("s2:"), body: buffer("m1\n"))  // a stream message: never replaced
        outbox.writerBlocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        outbox.offer(token: 3, prefix: buffer("t3:"), body: buffer("v1\n"))
        outbox.append(token: 2, prefix: buffer("s2:"), body: buffer("m2\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v3\n"))
        outbox.enqueue(buffer("r1\n"))
        #expect(text(outbox.take().chunks) == "t1:v1\ns2:m1\nt1:v3\nt3:v1\ns2:m2\nr1\n")
        #expect(outbox.coalescedCount == 1)
        #expect(outbox.queuedBytes == 0)
    }

    @Test func pastHalfTheBudgetNotificationsCoalesceEvenWhileTheSocketAcceptsBytes() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 40, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("0123456789abcdef\n"))  // 20 bytes: not past half
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))  // 26: now past half
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v3\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v4\n"))
        #expect(!outbox.wasCutOff)
        #expect(text(outbox.take().chunks) == "t1:0123456789abcdef\nt1:v2\nt1:v4\n")
        #expect(outbox.coalescedCount == 1)
    }

    @Test func aChangeThatReplacesAnUnsentOneIsSentAsFullState() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        let full: ConnectionOutbox.FullState = { ByteBuffer(string: "full\n") }
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change1\n"), fullState: full)
        #expect(text(outbox.take().chunks) == "t1:change1\n", "alone, a change goes as it is")
        outbox.writerBlocked()
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change2\n"), fullState: full)
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change3\n"), fullState: full)
        #expect(text(outbox.take().chunks) == "t1:full\n", "merged changes become the full state")
    }

    @Test func overTheByteLimitTheClientIsCutOffWithOneClosingNotification() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 100, maxStall: .seconds(30))
        for token in 1...20 { outbox.offer(token: Int64(token), prefix: buffer("p:"), body: buffer("0123456789\n")) }
        #expect(outbox.wasCutOff)
        let text = text(outbox.take().chunks)
        #expect(text.split(separator: "\n").count == 1, "only the closing notification is left")
        #expect(text.contains("\"method\":\"connection.closing\""))
        #expect(text.contains("-32003"))
        outbox.offer(token: 99, prefix: buffer("p:"), body: buffer("late\n"))
        let after = outbox.take()
        #expect(after.chunks.isEmpty && after.finished, "nothing is accepted after the cut-off; the writer ends")
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

    @Test func bytesGoInChunksThatAreNeverReallocated() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 30, maxStall: .seconds(30))
        let body = buffer(String(repeating: "x", count: 999) + "\n")
        for _ in 0..<100 { outbox.offer(token: 1, prefix: buffer("t:"), body: body) }
        let chunks = outbox.take().chunks
        #expect(chunks.reduce(0) { $0 + $1.readableBytes } == 100_200)
        #expect(chunks.count == 3, "4 KiB, then 64 KiB chunks: \(chunks.map(\.readableBytes))")
        #expect(chunks.allSatisfy { $0.capacity <= ConnectionOutbox.chunkBytes })
        #expect(text(chunks) == String(repeating: "t:" + String(repeating: "x", count: 999) + "\n", count: 100))
    }

    @Test func closeDrainsWhatIsQueuedThenEnds() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.close(final: buffer("bye\n"))
        let last = outbox.take()
        #expect(text(last.chunks) == "r1\nbye\n" && last.finished)
    }

    @Test func whatWasQueuedBeforeTheWriterStartedWakesItAtOnce() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.close(final: buffer("refused\n"))
        let wakeups = Mutex(0)
        outbox.setWakeup { _ in wakeups.withLock { $0 += 1 } }
        #expect(wakeups.withLock { $0 } == 1)
        let batch = outbox.take()
        #expect(text(batch.chunks) == "refused\n" && batch.finished)
    }

    @Test func anAnswerQueuedBeforeTheWriterStartedWakesItAtOnce() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("answer\n"))  // copied as bytes: the client keeps up
        let wakeups = Mutex(0)
        outbox.setWakeup { _ in wakeups.withLock { $0 += 1 } }
        #expect(wakeups.withLock { $0 } == 1)
        #expect(text(outbox.take().chunks) == "answer\n")
    }

    @Test func theWriterIsWokenOnceUntilItTakesTheQueue() {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        let wakeups = Mutex(0)
        outbox.setWakeup { _ in wakeups.withLock { $0 += 1 } }
        outbox.offer(token: 7, prefix: buffer("p:"), body: buffer("a\n"))
        outbox.enqueue(buffer("r\n"))
        #expect(wakeups.withLock { $0 } == 1, "items queued while a wake-up is pending do not wake again")
        #expect(text(outbox.take().chunks) == "p:a\nr\n")
        outbox.offer(token: 7, prefix: buffer("p:"), body: buffer("b\n"))
        #expect(wakeups.withLock { $0 } == 2)
        outbox.close()
        #expect(wakeups.withLock { $0 } == 2, "the pending wake-up covers the close too")
        #expect(outbox.take().finished)
    }
}
