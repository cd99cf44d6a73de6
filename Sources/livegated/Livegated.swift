// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateDaemon
import LiveSDK
import Logging
import ServiceLifecycle
import UnixSignals

@main
struct Livegated: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegated",
        abstract: "The livegate daemon: one cloud session, cache and realtime connection for every local process."
    )

    @Option(
        help:
            "Unix socket to listen on when systemd passes none. Default: /run/livegate/livegate.sock as root, else $XDG_RUNTIME_DIR/livegate/livegate.sock."
    )
    var socket: String?

    @Option(help: "Directory for the cache. Default: $STATE_DIRECTORY, else /var/lib/livegate.")
    var stateDir: String?

    @Option(help: "The cloud's base URL.")
    var cloudURL = "http://127.0.0.1:8080"

    @Option(help: "The cloud user the daemon logs in as.")
    var username: String

    @Option(help: "File holding the cloud password. Default: $CREDENTIALS_DIRECTORY/cloud-password (systemd LoadCredential=).")
    var passwordFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "livegated")

        guard let passwordPath = passwordFile ?? environment["CREDENTIALS_DIRECTORY"].map({ $0 + "/cloud-password" }) else {
            throw ValidationError("no cloud password: pass --password-file, or run under systemd with LoadCredential=cloud-password")
        }
        let password: String
        do {
            password = try String(contentsOfFile: passwordPath, encoding: .utf8).trimmingCharacters(in: .newlines)
        } catch {
            throw ValidationError("cannot read the cloud password from \(passwordPath): \(error.localizedDescription)")
        }

        let configuration = DaemonConfiguration(
            socketPath: socket ?? Self.defaultSocketPath(environment),
            stateDirectory: stateDir ?? environment["STATE_DIRECTORY"] ?? "/var/lib/livegate",
            cloudURL: cloudURL,
            credentials: Credentials(username: username, password: password)
        )
        let daemon = try LiveGateDaemon(configuration: configuration, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: daemon.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
    }

    static func defaultSocketPath(_ environment: [String: String]) -> String {
        if getuid() != 0, let runtime = environment["XDG_RUNTIME_DIR"] { return runtime + "/livegate/livegate.sock" }
        return "/run/livegate/livegate.sock"
    }
}
