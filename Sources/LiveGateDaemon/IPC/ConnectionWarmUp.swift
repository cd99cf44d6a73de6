// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import NIOEmbedded

/// A client connection's pipeline set up once on an `EmbeddedChannel`, and one frame read through it, before
/// the socket accepts any connection.
///
/// The Swift runtime can crash when two threads instantiate a generic class's metadata for the first time at
/// once (two connections set up on two event loops; see livegate-cloud's `ConnectionWarmUp`). With `event-loops` above one (machines of three cores or more), the daemon sets up its
/// first connections on several loops at once too. An instantiated type is only looked up afterwards, so once
/// this has run, the loops no longer instantiate what a connection's pipeline and its async channel need.
package enum ConnectionWarmUp {
    /// Sets the pipeline up, feeds it one line, closes it, and returns the frame the connection's async channel
    /// gave.
    package static func run(maxFrameBytes: Int) async throws -> InboundFrame? {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(JSONLineFrameDecoder(maxFrameBytes: maxFrameBytes)))
        let connection = try NIOAsyncChannel(
            wrappingChannelSynchronously: channel,
            configuration: .init(inboundType: InboundFrame.self, outboundType: ByteBuffer.self)
        )
        try channel.writeInbound(ByteBuffer(string: "{}\n"))
        // Closed before it is read, so the read ends (with what was buffered) whatever happens: a daemon that
        // waited here would never serve.
        channel.close(promise: nil)
        channel.embeddedEventLoop.run()
        // Read as a connection reads (``ClientConnection``); closed already, so the close that follows waits for
        // nothing.
        return try await connection.executeThenClose { inbound, _ in
            var frames = inbound.makeAsyncIterator()
            return try await frames.next()
        }
    }
}
