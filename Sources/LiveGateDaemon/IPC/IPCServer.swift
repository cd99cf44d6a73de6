// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveGateSystemd
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The Unix-socket listener: adopts the socket systemd passes (socket activation) or binds its own, tells
/// the service manager it is ready, and serves each connection in its own child task.
///
/// On graceful shutdown it stops accepting, tells every client (`connection.closing`), lets their queues
/// drain, and returns when all connections have ended.
struct IPCServer: Service {
    let context: DaemonContext
    let logger: Logger
    private var connections: ConnectionRegistry { context.connections }
    private var notifier: any ReadinessNotifier { context.notifier }

    init(context: DaemonContext, logger: Logger) {
        self.context = context
        self.logger = logger
    }

    func run() async throws {
        let configuration = context.configuration
        let settings = context.settings
        let flushers = context.flushers
        let bootstrap = ServerBootstrap(group: flushers.group)
            .serverChannelOption(.backlog, value: 1024)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 32 << 10, high: 256 << 10))
        let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<InboundFrame, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                // Limits are read per connection, so a reload applies to every connection opened after it.
                let maxFrameBytes = settings.limits.maxFrameBytes
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(JSONLineFrameDecoder(maxFrameBytes: maxFrameBytes)))
                try channel.pipeline.syncOperations.addHandler(OutboxWriter(flusher: flushers.of(channel.eventLoop)))
                return try NIOAsyncChannel(
                    wrappingChannelSynchronously: channel,
                    configuration: .init(inboundType: InboundFrame.self, outboundType: ByteBuffer.self)
                )
            }
        }
        let server: NIOAsyncChannel<NIOAsyncChannel<InboundFrame, ByteBuffer>, Never>
        let ownsSocketFile: Bool
        if let fd = ListenFDs.takeUnixStreamListener() {
            server = try await bootstrap.bind(fd, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            ownsSocketFile = false
            logger.info("serving on the socket passed by systemd", metadata: ["fd": "\(fd)"])
        } else {
            let directory = (configuration.socketPath as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            server = try await bootstrap.bind(
                unixDomainSocketPath: configuration.socketPath,
                cleanupExistingSocketFile: true,
                childChannelInitializer: initializer
            )
            ownsSocketFile = true
            chmod(configuration.socketPath, mode_t(configuration.socketMode))
            logger.info("serving", metadata: ["socket": "\(configuration.socketPath)"])
        }
        notifier.notify("READY=1\nSTATUS=serving local clients on \(configuration.socketPath)")
        connections.markServing()

        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await child in inbound.cancelOnGracefulShutdown() {
                    let connection = connections.add(context: context, eventLoop: child.channel.eventLoop, logger: logger)
                    group.addTask {
                        await connection.run(child)
                        connections.remove(connection)
                    }
                }
            }
            // No more accepts: tell every client and let their queues drain.
            notifier.notify("STOPPING=1\nSTATUS=shutting down")
            logger.notice(
                "shutting down: telling clients",
                metadata: [LogField.messageID: .string(LogMessageID.stopping), "clients": "\(connections.count)"]
            )
            let goodbye = try? NotificationFrame.standalone(
                method: NotificationMethod.connectionClosing,
                params: ConnectionClosingParams(code: .cloudUnavailable, message: "the daemon is shutting down; reconnect later")
            )
            connections.shutdownAll(final: goodbye)
        }
        if ownsSocketFile { unlink(configuration.socketPath) }
        logger.info("stopped serving")
    }
}

/// The open connections, so shutdown can reach them.
final class ConnectionRegistry: Sendable {
    private struct State {
        var next: UInt64 = 0
        var open: [UInt64: ClientConnection] = [:]
        var serving = false
    }

    private let state = Mutex(State())

    func add(context: DaemonContext, eventLoop: any EventLoop, logger: Logger) -> ClientConnection {
        state.withLock { state in
            state.next += 1
            let connection = ClientConnection(id: state.next, context: context, eventLoop: eventLoop, logger: logger)
            state.open[state.next] = connection
            return connection
        }
    }

    func remove(_ connection: ClientConnection) {
        _ = state.withLock { $0.open.removeValue(forKey: connection.id) }
    }

    var count: Int { state.withLock { $0.open.count } }

    /// Whether the server has bound its socket and announced `READY=1`.
    var isServing: Bool { state.withLock { $0.serving } }

    func markServing() { state.withLock { $0.serving = true } }

    /// How many tokens all open connections hold.
    var tokenCount: Int { state.withLock { Array($0.open.values) }.reduce(0) { $0 + $1.tokenCount } }

    func shutdownAll(final: ByteBuffer?) {
        for connection in state.withLock({ Array($0.open.values) }) { connection.shutdown(final: final) }
    }
}
