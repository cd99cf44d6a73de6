// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import NIOEmbedded
import Testing

@Suite struct OutboxWriterTests {
    /// A connected channel on `loop` with a writer started on a fresh outbox.
    func writing(on loop: EmbeddedEventLoop) throws -> (EmbeddedChannel, ConnectionOutbox) {
        let flusher = LoopFlusher(eventLoop: loop)
        let channel = EmbeddedChannel(handler: OutboxWriter(flusher: flusher), loop: loop)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/outbox-writer-test")).wait()
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30), eventLoop: loop, chunkPool: flusher.chunks)
        let writer = try channel.pipeline.handler(type: OutboxWriter.self).wait()
        _ = writer.start(outbox, channel: channel)
        return (channel, outbox)
    }

    func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test func whatTheFanOutOffersIsWrittenAtOnce() throws {
        let loop = EmbeddedEventLoop()
        let (channel, outbox) = try writing(on: loop)
        var bodies = SharedBodies()
        bodies.append(ByteBuffer(string: "v1\n"))
        bodies.append(ByteBuffer(string: "v2\n"))
        outbox.offerOnLoop(token: 1, prefix: ByteBuffer(string: "t1:"), bodies: bodies)
        #expect(try written(channel) == "t1:v1\nt1:v2\n", "written before the loop runs another task")
        loop.run()
        outbox.offerOnLoop(token: 1, prefix: ByteBuffer(string: "t1:"), bodies: bodies, admitted: [1])
        #expect(try written(channel) == "t1:v2\n", "and again for the next offer after the loop's flush")
        _ = try channel.finish()
    }

    /// Fan-out tasks of many topics, each with news for one token of the connection (a client observing many
    /// objects): the first is written at once, the rest in one write at the loop's next flush.
    @Test func offersOfManyTopicsInOneRoundShareAWrite() throws {
        let loop = EmbeddedEventLoop()
        let (channel, outbox) = try writing(on: loop)
        for token in 1...5 {
            var bodies = SharedBodies()
            bodies.append(ByteBuffer(string: "v\(token)\n"))
            outbox.offerOnLoop(token: Int64(token), prefix: ByteBuffer(string: "t\(token):"), bodies: bodies)
        }
        var writes: [String] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { writes.append(String(buffer: buffer)) }
        #expect(writes == ["t1:v1\n"])
        loop.run()
        #expect(try written(channel) == "t2:v2\nt3:v3\nt4:v4\nt5:v5\n")
        _ = try channel.finish()
    }

    @Test func answersJoinTheLoopsNextFlushTogether() throws {
        let loop = EmbeddedEventLoop()
        let (channel, outbox) = try writing(on: loop)
        outbox.enqueue(ByteBuffer(string: "r1\n"))
        outbox.enqueue(ByteBuffer(string: "r2\n"))
        #expect(try written(channel).isEmpty, "queued by tasks on the loop, not yet run")
        loop.run()
        #expect(try written(channel) == "r1\nr2\n")
        _ = try channel.finish()
    }

    @Test func aFanOutOfferWaitsBehindWhatWaitsForTheFlush() throws {
        let loop = EmbeddedEventLoop()
        let (channel, outbox) = try writing(on: loop)
        // A joining token's first notification is queued on the loop and joins the loop's next flush.
        outbox.offerOnLoop(token: 1, prefix: ByteBuffer(string: "t1:"), body: ByteBuffer(string: "v0\n"))
        var bodies = SharedBodies()
        bodies.append(ByteBuffer(string: "v1\n"))
        outbox.offerOnLoop(token: 1, prefix: ByteBuffer(string: "t1:"), bodies: bodies)
        #expect(try written(channel).isEmpty, "the writer was already asked to write in the flush")
        loop.run()
        #expect(try written(channel) == "t1:v0\nt1:v1\n")
        _ = try channel.finish()
    }

    /// Stands for a client's socket that is full once the first write was flushed (NIO's channel past its
    /// high watermark).
    private final class SocketFullAfterFlush: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer

        func flush(context: ChannelHandlerContext) {
            context.flush()
            (context.channel as? EmbeddedChannel)?.isWritable = false
        }
    }

    @Test func aClientWhoseSocketFilledWithAWriteIsBehindFromThen() throws {
        let loop = EmbeddedEventLoop()
        let flusher = LoopFlusher(eventLoop: loop)
        let channel = EmbeddedChannel(handlers: [SocketFullAfterFlush(), OutboxWriter(flusher: flusher)], loop: loop)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/outbox-writer-test")).wait()
        let outbox = ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30), eventLoop: loop, chunkPool: flusher.chunks)
        _ = try channel.pipeline.handler(type: OutboxWriter.self).wait().start(outbox, channel: channel)
        let prefix = ByteBuffer(string: "t1:")
        var first = SharedBodies()
        first.append(ByteBuffer(string: "v1\n"))
        outbox.offerOnLoop(token: 1, prefix: prefix, bodies: first)
        #expect(try written(channel) == "t1:v1\n")
        // The socket is full now: the next batch is not copied for it, its latest change waits in its place.
        var next = SharedBodies()
        next.append(ByteBuffer(string: "v2\n"))
        next.append(ByteBuffer(string: "v3\n"))
        outbox.offerOnLoop(token: 1, prefix: prefix, bodies: next)
        #expect(outbox.coalescedCount == 1, "v2 was replaced by v3")
        #expect(try written(channel).isEmpty)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        loop.run()
        #expect(try written(channel) == "t1:v3\n")
        _ = try channel.finish()
    }
}
