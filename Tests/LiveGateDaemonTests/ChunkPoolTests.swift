// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import NIOEmbedded
import Testing

@Suite struct ChunkPoolTests {
    func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? { buffer.withVeryUnsafeBytes { $0.baseAddress } }

    @Test func aRecycledChunkIsTakenAgainEmptyWithTheSameMemory() {
        let pool = ChunkPool(eventLoop: EmbeddedEventLoop())
        #expect(pool.take(capacity: 100) == nil, "nothing spare yet")
        var chunk = ByteBufferAllocator().buffer(capacity: ConnectionOutbox.firstChunkBytes)
        chunk.writeString("written")
        let memory = address(chunk)
        pool.recycle([chunk])
        chunk = ByteBuffer()
        let taken = pool.take(capacity: 100)
        #expect(taken?.readableBytes == 0)
        #expect(taken.flatMap(address) == memory, "the same memory, not a new allocation")
        #expect(pool.take(capacity: 100) == nil, "taken once")
    }

    @Test func aChunkTheSocketStillHoldsIsNeverWrittenOver() {
        let pool = ChunkPool(eventLoop: EmbeddedEventLoop())
        var chunk = ByteBufferAllocator().buffer(capacity: ConnectionOutbox.firstChunkBytes)
        chunk.writeString("not written yet")
        let held = chunk  // what a pending write keeps
        pool.recycle([chunk])
        var taken = pool.take(capacity: 100)
        taken?.writeString("next")
        #expect(String(buffer: held) == "not written yet")
        #expect(taken.flatMap(address) != address(held))
    }

    @Test func sizesAreKeptApartAndTheSparesBounded() {
        let small = ByteBufferAllocator().buffer(capacity: ConnectionOutbox.firstChunkBytes).capacity
        let pool = ChunkPool(eventLoop: EmbeddedEventLoop(), maxBytes: 2 * small)
        pool.recycle((0..<3).map { _ in ByteBufferAllocator().buffer(capacity: ConnectionOutbox.firstChunkBytes) })
        pool.recycle([ByteBufferAllocator().buffer(capacity: 300_000)])  // neither size: left to be freed
        #expect(pool.take(capacity: ConnectionOutbox.firstChunkBytes + 1) == nil, "no large chunk for a large need")
        #expect(pool.take(capacity: 10) != nil)
        #expect(pool.take(capacity: 10) != nil)
        #expect(pool.take(capacity: 10) == nil, "two kept: the bound")
    }

    @Test func anOutboxTakesItsLoopsSpareChunks() {
        let loop = EmbeddedEventLoop()
        let pool = ChunkPool(eventLoop: loop)
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30), eventLoop: loop, chunkPool: pool)
        outbox.enqueue(ByteBuffer(string: "first\n"))
        loop.run()
        var first = outbox.take().chunks
        #expect(first.count == 1)
        let memory = address(first[0])
        pool.recycle(first)
        first = []  // as the writer's: written, then let go
        outbox.enqueue(ByteBuffer(string: "second\n"))
        loop.run()
        let second = outbox.take().chunks
        #expect(second.map { String(buffer: $0) } == ["second\n"])
        #expect(second.map(address) == [memory])
    }
}
