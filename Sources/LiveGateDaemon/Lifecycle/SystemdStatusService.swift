// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveGateSystemd
import LiveSDK
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Keeps the service manager informed: `STATUS=` in one line whenever it changes (session, cloud
/// connection, clients, tokens), and, when `WATCHDOG_USEC` is set, `WATCHDOG=1` at half that period, but
/// only after a health check that every event loop and the engine still answer. A wedged loop stops the
/// pings, and systemd restarts the daemon.
struct SystemdStatusService: Service {
    let context: DaemonContext
    let logger: Logger
    /// From `WATCHDOG_USEC` (and `WATCHDOG_PID`, when set, naming this process).
    let watchdogInterval: Duration?

    init(context: DaemonContext, logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.context = context
        self.logger = logger
        self.watchdogInterval = Self.watchdogInterval(environment)
    }

    static func watchdogInterval(_ environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
        return .microseconds(usec / 2)
    }

    func run() async throws {
        let tick = min(watchdogInterval ?? .seconds(1), .seconds(1))
        var lastStatus = ""
        var nextPing = ContinuousClock.now
        var unhealthySince: ContinuousClock.Instant?
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            // Nothing is said before the IPC server's READY=1, so that it is always the first message.
            guard context.connections.isServing else {
                await cancelWhenGracefulShutdown { try? await Task.sleep(for: .milliseconds(20)) }
                continue
            }
            if let watchdogInterval, ContinuousClock.now >= nextPing {
                if await healthy() {
                    context.notifier.notify("WATCHDOG=1")
                    if let since = unhealthySince {
                        logger.notice("health check passes again", metadata: ["after": "\(ContinuousClock.now - since)"])
                        unhealthySince = nil
                    }
                } else if unhealthySince == nil {
                    unhealthySince = .now
                }
                nextPing = ContinuousClock.now + watchdogInterval
            }
            let status = await context.statusLine()
            // Not sent (the service manager is not reading now): tried again at the next tick.
            if status != lastStatus, context.notifier.notify("STATUS=\(status)") { lastStatus = status }
            // Ends at once on graceful shutdown, so stopping is not held up by this loop.
            await cancelWhenGracefulShutdown { try? await Task.sleep(for: tick) }
        }
    }

    /// Every event loop runs a task, and the engine's actor answers. Blocks while a loop is wedged: no
    /// ping can be sent for a daemon that cannot serve.
    private func healthy() async -> Bool {
        for loop in context.flushers.group.makeIterator() {
            do {
                try await loop.submit {}.get()
            } catch {
                return false
            }
        }
        _ = await context.engine.connectionStatus
        return true
    }
}

extension DaemonContext {
    /// What `STATUS=` says, always from the current state (every sender, the READY=1 after start and after a
    /// reload included, builds it here):
    /// `cloud session established, realtime connected; 2 clients, 5 tokens; on /run/livegate/livegate.sock`.
    func statusLine() async -> String {
        let session = await engine.session.state
        let connection = await engine.connectionStatus
        let socket = connections.servingSocket.map { "; on \($0)" } ?? ""
        let quarantined = QuarantinedOutbox.kept(by: engine).map { "; \($0.summary)" } ?? ""
        return
            "cloud session \(session.rawValue), realtime \(connection.rawValue); \(connections.count) clients, \(connections.tokenCount) tokens\(socket)\(quarantined)"
    }
}
