// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateClient
import LiveGateProtocol

/// `livegatectl stats`: what `daemon.stats` says, readable.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon's figures: uptime, clients, tokens, observed objects, the cloud link."
    )
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print daemon.stats's answer as JSON.") var json = false

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let stats = try await daemon.stats()
            if json {
                print(jsonText(stats))
                return
            }
            var rows: [(String, String)] = [
                ("version", stats.version),
                ("uptime", Self.duration(stats.uptimeSeconds)),
                ("cloud session", stats.session.session),
                ("realtime link", stats.session.connection),
                ("clients", "\(stats.connections)"),
                ("tokens", "\(stats.tokens)"),
                ("observed objects", "\(stats.observedObjects) (\(stats.objectTokens) tokens)"),
                ("pending writes", "\(stats.pendingWrites)"),
                (
                    "bodies encoded",
                    "collections \(stats.collectionBodiesEncoded), streams \(stats.streamBodiesEncoded), feeds \(stats.feedBodiesEncoded)"
                ),
            ]
            if let quarantined = stats.quarantinedOutbox { rows.append(("outbox", quarantined.summary)) }
            let width = rows.map(\.0.count).max() ?? 0
            for (name, value) in rows {
                print(name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value)
            }
        }
    }

    /// `3d 4h`, `2h 5m`, `5m 3s`, `42s`.
    static func duration(_ seconds: Int) -> String {
        let (days, hours, minutes, rest) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
        if days > 0 { return "\(days)d \(hours)h" }
        if hours > 0 { return "\(hours)h \(minutes)m" }
        if minutes > 0 { return "\(minutes)m \(rest)s" }
        return "\(rest)s"
    }
}

/// `livegatectl clients`: every connection, one line each (administrators).
struct Clients: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the daemon's clients: pid, user, name, tokens, queued bytes, coalesced notifications, cut-offs.",
        discussion: "For administrators: root, the daemon's user, or admin-users / admin-groups in its configuration."
    )
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print daemon.clients's answer as JSON.") var json = false

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let clients = try await daemon.clients()
            if json {
                print(jsonText(DaemonClientsResult(clients: clients)))
                return
            }
            let header = ["CONN", "PID", "UID", "CLIENT", "ACCESS", "TOKENS", "QUEUED", "COALESCED", "CUT OFF", "AGE"]
            let rows = clients.map { client in
                [
                    "\(client.connection)", client.pid.map(String.init) ?? "-", client.uid.map(String.init) ?? "-", client.client ?? "-",
                    client.access, "\(client.tokens)", "\(client.queuedBytes)", "\(client.coalesced)", client.cutOff ? "yes" : "no",
                    Stats.duration(client.connectedSeconds),
                ]
            }
            let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
            for row in [header] + rows {
                print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
            }
        }
    }
}

/// `livegatectl log-level LEVEL`: the daemon's log level, now, without editing a file or reloading
/// (administrators).
struct LogLevel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-level",
        abstract: "Set the daemon's log level now, until its next reload or restart (administrators).",
        discussion: "Levels: trace, debug, info, notice, warning, error, critical. Example: sudo livegatectl log-level debug"
    )
    static let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The new level.") var level: String

    func validate() throws {
        guard Self.levels.contains(level) else {
            throw ValidationError("the level must be one of \(Self.levels.joined(separator: ", ")), not \(level)")
        }
    }

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let result = try await daemon.setLogLevel(level)
            print("log level \(result.level) (was \(result.previous)); a reload or restart sets the configured level again")
        }
    }
}
