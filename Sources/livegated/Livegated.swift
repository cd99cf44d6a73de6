// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateConfig
import LiveGateDaemon
import LiveGateProtocol
import LiveGateSystemd
import LiveGateVersion
import LiveSDK
import Logging
import ServiceLifecycle
import UnixSignals

@main
struct Livegated: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegated",
        abstract: "The livegate daemon: one cloud session, cache and realtime connection for every local process.",
        discussion: """
            Settings come from --config (see systemd/livegated.conf.example); flags override the file. \
            SIGHUP re-reads the file (log level and limits); SIGTERM shuts down gracefully.
            """,
        version: LiveGateVersion.current
    )

    @Option(help: "Configuration file (name = value lines), re-read on SIGHUP.")
    var config: String?

    @Option(help: ArgumentHelp("Validate a configuration file, print what is wrong, and exit (0: valid).", valueName: "file"))
    var checkConfig: String?

    @Option(
        help:
            "Unix socket to listen on when systemd passes none. Default: $LIVEGATE_SOCKET, else /run/livegate/livegate.sock (where livegatectl and the client libraries look too)."
    )
    var socket: String?

    @Option(help: "Permission bits of a socket the daemon binds itself, in octal. Default: 0660.")
    var socketMode: String?

    @Option(help: "Group (name or id) of a socket the daemon binds itself. Default: the daemon's own group.")
    var socketGroup: String?

    @Option(help: "Directory for the cache. Default: $STATE_DIRECTORY, else /var/lib/livegate.")
    var stateDir: String?

    @Option(help: "The cloud's base URL.")
    var cloudURL: String?

    @Option(help: "The cloud user the daemon logs in as.")
    var username: String?

    @Option(help: "File holding the cloud password. Default: $CREDENTIALS_DIRECTORY/cloud-password (systemd LoadCredential=).")
    var passwordFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (overrides the file's).")
    var logLevel: String?

    @Option(help: "Where logs go: auto (the journal when it is there, else stderr), journal, stderr.")
    var logTarget: String = "auto"

    @Flag(help: .hidden) var testHooks = false

    func run() async throws {
        if let checkConfig {
            do {
                _ = try ConfigFile.load(path: checkConfig)
                print("\(checkConfig): valid")
                return
            } catch {
                FileHandle.standardError.write(Data("livegated: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
        let environment = ProcessInfo.processInfo.environment
        let file: ConfigFile
        do {
            file = try config.map { try ConfigFile.load(path: $0) } ?? ConfigFile()
        } catch {
            throw ValidationError("\(error)")
        }
        let mode: UInt16?
        let socketGroupID: UInt32?
        do {
            mode = try socketMode.map { text throws(ConfigError) in try ConfigFile.socketMode(text) }
            socketGroupID = try socketGroup.map { text throws(ConfigError) in try ConfigFile.group(text) }
        } catch {
            throw ValidationError("\(error)")
        }
        let levelOverride = try logLevel.map { name -> Logger.Level in
            guard let level = Logger.Level(rawValue: name) else {
                throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
            }
            return level
        }
        let level = levelOverride ?? file.logLevel ?? .info
        guard let target = LogDestination.Target(rawValue: logTarget) else {
            throw ValidationError("--log-target must be auto, journal or stderr")
        }
        let levelControl = LogLevelControl(level)
        LoggingSystem.bootstrap(LogDestination.handlerFactory(identifier: "livegated", level: levelControl, target: target))
        let logger = Logger(label: "livegated")

        guard let cloudURL = cloudURL ?? file.cloudURL else { throw ValidationError("no cloud URL: pass --cloud-url or set cloud-url in --config") }
        guard let username = username ?? file.username else { throw ValidationError("no cloud user: pass --username or set username in --config") }
        guard
            let passwordPath = passwordFile ?? file.passwordFile
                ?? environment["CREDENTIALS_DIRECTORY"].map({ $0 + "/cloud-password" })
        else {
            throw ValidationError("no cloud password: pass --password-file, or run under systemd with LoadCredential=cloud-password")
        }
        let password: String
        do {
            password = try String(contentsOfFile: passwordPath, encoding: .utf8).trimmingCharacters(in: .newlines)
        } catch {
            throw ValidationError("cannot read the cloud password from \(passwordPath): \(error.localizedDescription)")
        }

        let configuration = DaemonConfiguration(
            socketPath: socket ?? file.socketPath ?? DaemonSocket.defaultPath(environment: environment),
            socketMode: mode ?? file.socketMode ?? 0o660,
            socketGroup: socketGroupID ?? file.socketGroup,
            stateDirectory: stateDir ?? file.stateDirectory ?? environment["STATE_DIRECTORY"] ?? "/var/lib/livegate",
            cacheMaxEntities: file.cacheMaxEntities,
            eventLoops: file.eventLoops,
            realtimePingInterval: file.realtimePingSeconds.map { .seconds($0) } ?? LiveSDKConfiguration.defaultRealtimePingInterval,
            cloudURL: cloudURL,
            credentials: Credentials(username: username, password: password),
            logLevel: level,
            limits: file.limits,
            configPath: config,
            logLevelOverride: levelOverride,
            testHooks: testHooks
        )
        let settings = ReloadableSettings(logLevelControl: levelControl, limits: file.limits, policy: file.policy)
        let daemon: LiveGateDaemon
        do {
            daemon = try await LiveGateDaemon(configuration: configuration, settings: settings, logger: logger)
        } catch let error as LiveError where error.code == .storageDamaged {
            // The outbox is damaged and could not be salvaged (a full or read-only disk; a damaged outbox is otherwise
            // salvaged, a damaged cache moved aside): restarting cannot help, and starting without it would drop
            // writes clients were told are queued.
            logger.critical("\(error.message)", metadata: [LogField.messageID: .string(LogMessageID.outboxDamaged)])
            throw ExitCode(65)  // EX_DATAERR; the unit does not restart on it
        } catch {
            // Into the journal with the rest (a full or read-only state directory: the restart may succeed).
            logger.critical("livegated cannot start: \(error)")
            throw ExitCode(1)
        }
        logger.notice(
            "livegated \(LiveGateVersion.current) starting",
            metadata: [
                LogField.messageID: .string(LogMessageID.started), "cloud": "\(cloudURL)", "user": "\(username)",
                "eventLoops": "\(configuration.eventLoops)",
            ]
        )
        var groupConfiguration = ServiceGroupConfiguration(
            services: daemon.services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        // Below the unit's TimeoutStopSec=20s: past this, what still runs is cancelled rather than killed.
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(15)
        // And what ignores cancellation stops the process 3 s later with a fatal error, whose backtrace (in the
        // journal) names the wait at fault, rather than a silent SIGKILL from the service manager at 20 s.
        groupConfiguration.maximumCancellationDuration = .seconds(3)
        let group = ServiceGroup(configuration: groupConfiguration)
        try await group.run()
    }
}
