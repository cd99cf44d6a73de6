// Licensed under the Apache License, Version 2.0.

import Dispatch
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

    /// The command publishing `payload` (its head and tail around the send stamp) to channel `bench`; with
    /// `stores`, a transaction that also stores it (`MULTI`, `SET bench:o1`, `PUBLISH`, `EXEC`), as the daemon keeps
    /// what it fans out.
    static func command(_ payload: (head: String, tail: String), stores: Bool) -> StampedMessage {
        let length = payload.head.utf8.count + StampedMessage.fieldWidth + payload.tail.utf8.count
        let publish = "*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$\(length)\r\n"
        guard stores else { return StampedMessage([publish + payload.head, payload.tail + "\r\n"]) }
        return StampedMessage([
            "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$8\r\nbench:o1\r\n$\(length)\r\n" + payload.head,
            payload.tail + "\r\n" + publish + payload.head,
            payload.tail + "\r\n*1\r\n$4\r\nEXEC\r\n",
        ])
    }

    /// Sends one command now, stamped with the time now.
    func publish(_ command: consuming StampedMessage) {
        command.stamp(DispatchTime.now().uptimeNanoseconds)
        channel.writeAndFlush(command.bytes, promise: nil)
    }

    /// Sends `commands` as fast as the channel's loop writes: 64 a flush (one `writev`), each stamped as its
    /// flush's commands are written.
    func publishBurst(_ commands: TakeOnce<[StampedMessage]>) async throws {
        let channel = self.channel
        try await channel.eventLoop.submit {
            // The only reference to each command's bytes: stamped in place, not copied.
            var commands = commands.take() ?? []
            for start in stride(from: 0, to: commands.count, by: 64) {
                let t = DispatchTime.now().uptimeNanoseconds
                for index in start..<min(start + 64, commands.count) {
                    commands[index].stamp(t)
                    channel.write(commands[index].bytes, promise: nil)
                }
                channel.flush()
            }
        }.get()
    }

    func close() async { try? await channel.close() }
}
