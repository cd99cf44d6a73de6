// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateConfig
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
/// On graceful shutdown it closes the socket, serves what was accepted before, closes (unserved) what was
/// accepted as it closed, tells every client (`connection.closing`), lets their queues drain, and returns
/// when all connections have ended. Every accepted connection is closed through `executeThenClose`, held
/// in ``AcceptedConnections`` until the accept loop takes it.
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
        let accepted = AcceptedConnections<NIOAsyncChannel<InboundFrame, ByteBuffer>>()
        let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<InboundFrame, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                // Limits are read per connection, so a reload applies to every connection opened after it.
                let maxFrameBytes = settings.limits.maxFrameBytes
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(JSONLineFrameDecoder(maxFrameBytes: maxFrameBytes)))
                try channel.pipeline.syncOperations.addHandler(OutboxWriter(flusher: flushers.of(channel.eventLoop)))
                return try accepted.admit(channel) {
                    try NIOAsyncChannel(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(inboundType: InboundFrame.self, outboundType: ByteBuffer.self)
                    )
                }
            }
        }
        do {
            _ = try await ConnectionWarmUp.run(maxFrameBytes: settings.limits.maxFrameBytes)
        } catch {
            logger.warning("could not set up a connection ahead of the first one", metadata: ["error": "\(error)"])
        }
        let server: NIOAsyncChannel<NIOAsyncChannel<InboundFrame, ByteBuffer>, Never>
        let ownsSocketFile: Bool
        let socketPath: String
        if let fd = ListenFDs.takeUnixStreamListener() {
            server = try await bootstrap.bind(fd, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            ownsSocketFile = false
            // The path systemd bound (livegated.socket's ListenStream=), not the configured one.
            socketPath = server.channel.localAddress?.pathname ?? "the socket passed by systemd (fd \(fd))"
            logger.info("serving on the socket passed by systemd", metadata: ["fd": "\(fd)", "socket": "\(socketPath)"])
        } else {
            socketPath = configuration.socketPath
            server = try await Self.bindOwnSocket(configuration, bootstrap: bootstrap, initializer: initializer)
            ownsSocketFile = true
            logger.info(
                "serving",
                metadata: ["socket": "\(socketPath)", "mode": "\(String(configuration.socketMode, radix: 8))"]
            )
        }
        connections.markBound(socket: socketPath)
        if await !notifier.notifyInsisting("READY=1\nSTATUS=\(await context.statusLine())") {
            logger.warning("the service manager does not read its notification socket: READY=1 not sent")
        }
        connections.markServing()

        try await withThrowingDiscardingTaskGroup { group in
            // On graceful shutdown the listener closes, and the loop serves what was accepted before (the
            // stream ends after it) rather than being cancelled with connections still in the stream.
            let listener = server.channel
            var failure: (any Error)?
            do {
                try await withGracefulShutdownHandler {
                    try await server.executeThenClose { inbound in
                        for try await child in inbound where accepted.take(child.channel) {
                            group.addTask {
                                // Known before anything is logged, so every entry about the client names it.
                                let peer = await PeerCredentials.of(child.channel)
                                let connection = connections.add(context: context, eventLoop: child.channel.eventLoop, peer: peer, logger: logger)
                                await connection.run(child)
                                connections.remove(connection)
                            }
                        }
                    }
                } onGracefulShutdown: {
                    listener.close(promise: nil)
                }
            } catch {
                if !Task.isCancelled { failure = error }
            }
            // Accepted as the listener closed (or the loop ended otherwise) and never taken: closed unserved.
            let unserved = accepted.stop()
            if !unserved.isEmpty { logger.debug("closing connections accepted as the socket closed", metadata: ["clients": "\(unserved.count)"]) }
            for child in unserved {
                group.addTask { try? await child.executeThenClose { _, _ in } }
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
            if let failure { throw failure }
        }
        if ownsSocketFile { unlink(configuration.socketPath) }
        logger.info("stopped serving")
    }
}

extension IPCServer {
    /// Binds the configured socket (its directory made when missing), with the configured mode and group.
    /// Failures say which path and what to do about it.
    static func bindOwnSocket<Output: Sendable>(
        _ configuration: DaemonConfiguration,
        bootstrap: ServerBootstrap,
        initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> NIOAsyncChannel<Output, Never> {
        let path = configuration.socketPath
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw SocketSetupError(
                    "cannot create the socket's directory \(directory) (\(error.localizedDescription)); pass --socket (or set socket, or $LIVEGATE_SOCKET) to a path this user may create"
                )
            }
        }
        let server: NIOAsyncChannel<Output, Never>
        do {
            server = try await bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true, childChannelInitializer: initializer)
        } catch {
            throw SocketSetupError("cannot listen on \(path): \(error)")
        }
        // The mode first, then the group: a client of the new group never sees the file with wider bits.
        guard chmod(path, mode_t(configuration.socketMode)) == 0 else {
            let reason = String(cString: strerror(errno))
            try? await server.channel.close()
            throw SocketSetupError("cannot set the mode of \(path) to \(String(configuration.socketMode, radix: 8)): \(reason)")
        }
        if let group = configuration.socketGroup, chown(path, uid_t.max, gid_t(group)) != 0 {
            let reason = String(cString: strerror(errno))
            try? await server.channel.close()
            throw SocketSetupError("cannot give \(path) to group \(group): \(reason) (only root, or a member of that group, may)")
        }
        return server
    }
}

/// The daemon could not set up its socket; the message names the path and what to do.
struct SocketSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The open connections, so shutdown can reach them.
final class ConnectionRegistry: Sendable {
    private struct State {
        var next: UInt64 = 0
        var open: [UInt64: ClientConnection] = [:]
        var serving = false
        var socket: String?
        /// Set by ``shutdownAll(final:)``: the goodbye for a connection added after it.
        var closing: ByteBuffer?? = nil
    }

    private let state = Mutex(State())

    /// A connection to serve; one added once shutdown began is told to close at once (it reads no request).
    func add(context: DaemonContext, eventLoop: any EventLoop, peer: PeerCredentials?, logger: Logger) -> ClientConnection {
        let (connection, closing) = state.withLock { state in
            state.next += 1
            let connection = ClientConnection(id: state.next, context: context, eventLoop: eventLoop, peer: peer, logger: logger)
            state.open[state.next] = connection
            return (connection, state.closing)
        }
        if let closing { connection.shutdown(final: closing) }
        return connection
    }

    func remove(_ connection: ClientConnection) {
        _ = state.withLock { $0.open.removeValue(forKey: connection.id) }
    }

    var count: Int { state.withLock { $0.open.count } }

    /// The open connections, in the order they were accepted.
    var all: [ClientConnection] { state.withLock { $0.open.sorted { $0.key < $1.key }.map(\.value) } }

    /// Whether the server has bound its socket and announced `READY=1`.
    var isServing: Bool { state.withLock { $0.serving } }

    func markServing() { state.withLock { $0.serving = true } }

    /// The path of the socket served, once bound.
    var servingSocket: String? { state.withLock { $0.socket } }

    func markBound(socket: String) { state.withLock { $0.socket = socket } }

    /// How many tokens all open connections hold.
    var tokenCount: Int { state.withLock { Array($0.open.values) }.reduce(0) { $0 + $1.tokenCount } }

    /// Tells every connection to close after its current request, and every one added from now on.
    func shutdownAll(final: ByteBuffer?) {
        let open = state.withLock { state in
            state.closing = .some(final)
            return Array(state.open.values)
        }
        for connection in open { connection.shutdown(final: final) }
    }
}
