// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import LiveGateProtocol
import NIOCore
import Testing

@Suite struct ConnectionWarmUpTests {
    /// Before the socket accepts, a connection's pipeline is set up and a frame read through its async channel,
    /// so the daemon's loops never instantiate those generic types for the first time at once (see
    /// ConnectionWarmUp). The frame must come out whole: a warm-up that stopped short would leave the rest to the
    /// first real connections.
    @Test func aFrameComesThroughAConnectionSetUpAheadOfTheSocket() async throws {
        let frame = try await ConnectionWarmUp.run(maxFrameBytes: 1 << 20)
        #expect(frame == .message(ByteBuffer(string: "{}")))
    }
}
