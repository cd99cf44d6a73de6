// Licensed under the Apache License, Version 2.0.

import NIOCore
import Testing

@testable import LiveGateDaemon

@Suite struct ConnectionOutboxTests {
    func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func responsesAndNotificationsKeepTheirOrder() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.offer(token: 1, prefix: buffer("p1:"), body: buffer("b1\n"))
        outbox.enqueue(buffer("r2\n"))
        let batch = await outbox.next()
        #expect(batch?.map { String(buffer: $0) } == ["r1\n", "p1:", "b1\n", "r2\n"])
    }

    @Test func unsentNotificationsOfATokenCoalesceToTheLatest() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v1\n"))
        outbox.offer(token: 2, prefix: buffer("t2:"), body: buffer("v1\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v2\n"))
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v3\n"))
        let batch = await outbox.next()
        #expect(batch?.map { String(buffer: $0) } == ["t1:", "v3\n", "t2:", "v1\n"])
        #expect(outbox.coalescedCount == 2)
        // After a batch is taken, a new notification of the token is queued again.
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("v4\n"))
        #expect(await outbox.next()?.map { String(buffer: $0) } == ["t1:", "v4\n"])
    }

    @Test func aChangeThatReplacesAnUnsentOneIsSentAsFullState() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        let full: ConnectionOutbox.FullState = { ByteBuffer(string: "full\n") }
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change1\n"), fullState: full)
        #expect(await outbox.next()?.map { String(buffer: $0) } == ["t1:", "change1\n"], "alone, a change goes as it is")
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change2\n"), fullState: full)
        outbox.offer(token: 1, prefix: buffer("t1:"), body: buffer("change3\n"), fullState: full)
        #expect(await outbox.next()?.map { String(buffer: $0) } == ["t1:", "full\n"], "merged changes become the full state")
    }

    @Test func overTheByteLimitTheClientIsCutOffWithOneClosingNotification() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 100, maxStall: .seconds(30))
        for token in 1...20 { outbox.offer(token: Int64(token), prefix: buffer("p:"), body: buffer("0123456789\n")) }
        #expect(outbox.wasCutOff)
        let batch = await outbox.next()
        #expect(batch?.count == 1)
        let text = batch.map { String(buffer: $0[0]) } ?? ""
        #expect(text.contains("\"method\":\"connection.closing\""))
        #expect(text.contains("-32003"))
        outbox.offer(token: 99, prefix: buffer("p:"), body: buffer("late\n"))
        #expect(await outbox.next() == nil, "nothing is accepted after the cut-off; the writer ends")
    }

    @Test func aWriterStuckLongerThanTheStallLimitIsCutOff() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .zero)
        outbox.offer(token: 1, prefix: buffer("p:"), body: buffer("a\n"))
        #expect(!outbox.wasCutOff, "an idle writer is not stalled")
        _ = await outbox.next()  // the writer takes a batch and (in this test) never comes back for more
        outbox.offer(token: 1, prefix: buffer("p:"), body: buffer("b\n"))
        #expect(outbox.wasCutOff)
    }

    @Test func closeDrainsWhatIsQueuedThenEnds() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        outbox.enqueue(buffer("r1\n"))
        outbox.close(final: buffer("bye\n"))
        #expect(await outbox.next()?.map { String(buffer: $0) } == ["r1\n", "bye\n"])
        #expect(await outbox.next() == nil)
    }

    @Test func aWaitingWriterIsWokenByAnOffer() async {
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30))
        async let batch = outbox.next()
        outbox.offer(token: 7, prefix: buffer("p:"), body: buffer("b\n"))
        #expect(await batch?.count == 2)
    }
}
