// Licensed under the Apache License, Version 2.0.

import NIOCore
import NIOPosix

/// Publishes to Redis channel `bench` over its Unix socket (RESP `PUBLISH`, or a transaction that also stores the
/// update), discarding the replies.
struct RedisPublisher {
    private final class Discard: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }

    let channel: any Channel

    init(socketPath: String, eventLoopGroup: any EventLoopGroup) async throws {
        channel = try await ClientBootstrap(group: eventLoopGroup)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Discard()) }
            }
            .connect(unixDomainSocketPath: socketPath).get()
    }

    func publish(_ payload: String) {
        let command = "*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$\(payload.utf8.count)\r\n\(payload)\r\n"
        channel.writeAndFlush(ByteBuffer(string: command), promise: nil)
    }

    /// Stores the update and publishes it in one transaction (`MULTI`, `SET bench:o1`, `PUBLISH`, `EXEC`), as the
    /// daemon keeps what it fans out.
    func storeAndPublish(_ payload: String) {
        let length = payload.utf8.count
        let command =
            "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$8\r\nbench:o1\r\n$\(length)\r\n\(payload)\r\n"
            + "*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$\(length)\r\n\(payload)\r\n*1\r\n$4\r\nEXEC\r\n"
        channel.writeAndFlush(ByteBuffer(string: command), promise: nil)
    }

    func close() async { try? await channel.close() }
}
