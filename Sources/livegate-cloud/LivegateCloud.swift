// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import Hummingbird
import LiveGateCloud
import LiveGateVersion
import Logging

@main
struct LivegateCloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegate-cloud",
        abstract: "The livegate reference cloud: REST + WebSocket realtime over SQLite or PostgreSQL.",
        version: LiveGateVersion.current,
        subcommands: [Serve.self, Seed.self],
        defaultSubcommand: Serve.self
    )
}

/// Where the data lives: a SQLite file, or a PostgreSQL database that several instances share.
struct StorageOptions: ParsableArguments {
    @Option(help: "SQLite file holding entities and the event log (created if missing).")
    var database: String?

    @Option(
        help: ArgumentHelp(
            "PostgreSQL database instead of SQLite, as a URL: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?host=/socket/dir&sslmode=disable|prefer|require] (PGPASSWORD is used when the URL has no password).",
            valueName: "url"
        )
    )
    var postgres: String?

    func validate() throws {
        guard (database == nil) != (postgres == nil) else {
            throw ValidationError("say where the data lives: --database FILE or --postgres URL (one of them)")
        }
    }

    func storage() throws -> CloudStorage {
        if let postgres {
            do { return try .postgres(url: postgres) } catch { throw ValidationError("--postgres: \(error)") }
        }
        return .sqlite(path: database ?? "")
    }

    /// Where the data lives, for messages (never with a password).
    var location: String { database ?? "PostgreSQL database \(postgres.map(CloudStorage.redacted) ?? "")" }
}

/// `livegate-cloud seed --demo --database FILE`: the demo social model.
struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write data into the database: with --demo, the social model of the reference documents."
    )

    @OptionGroup var storage: StorageOptions

    @Flag(help: "The demo data: users, communities, members, channels, messages, posts, comments, reactions, follows.")
    var demo = false

    func validate() throws {
        guard demo else { throw ValidationError("say what to seed: --demo") }
    }

    func run() async throws {
        let created = try await DemoSeed.write(into: try storage.storage(), logger: Logger(label: "livegate-cloud.seed"))
        print("seeded \(created) objects into \(storage.location)")
    }
}

/// `livegate-cloud [serve] ...`: serve the API.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the REST API and the realtime WebSocket (the default).")

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "TCP port to listen on (0 picks a free one; the bound port is printed).")
    var port = 8080

    @OptionGroup var storage: StorageOptions

    @Option(help: "File with one 'username:password' per line (the password in clear or as a bcrypt hash, $2b$...).")
    var usersFile: String

    @Option(help: "Access token lifetime, in seconds.")
    var tokenLifetime = 3600

    @Option(help: "Refresh token lifetime, in seconds.")
    var refreshLifetime = 30 * 86400

    @Option(help: "bcrypt cost for passwords given in clear in the users file (4-31).")
    var bcryptCost = 12

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    @Flag(help: "Serve /v1/admin/faults, with which tests provoke outages. Never in production.")
    var faultInjection = false

    @Option(help: "How many events the realtime log keeps for subscribers that resume with 'since'.")
    var eventRetention: Int64 = 100_000

    @Option(help: "File of 'COLLECTION read|write USERS' rules (default: every user may read and write everything).")
    var permissionsFile: String?

    @Option(name: .customLong("admin"), help: "A user who may create streams and set any user's stream ACL (repeatable).")
    var admins: [String] = []

    @Option(name: .customLong("stream"), help: "A Live Service stream to create at start if missing (repeatable).")
    var streams: [String] = []

    @Option(help: "The largest stream message accepted, in bytes of its JSON encoding.")
    var streamMessageLimit = 32 * 1024

    @Option(help: "Seconds an HTTP connection may go without a request, or take to send a request's head, before it is closed.")
    var idleTimeout = 60.0

    @Option(
        help:
            "Failed logins of a user name, or from an address, before each further attempt waits (1 s, doubling up to 5 min; answered 429 with Retry-After); 0 never waits."
    )
    var loginFailuresAllowed = 5

    @Option(
        help:
            "Connections held at once; one more closes the connection idle longest (a realtime WebSocket never), or is answered 503 when every one is busy. 0: the descriptor limit, raised to its hard limit at start, less 256."
    )
    var maxConnections = 0

    func run() async throws {
        // Every logger of the process, Hummingbird's per request among them (``CloudLogHandler``).
        LoggingSystem.bootstrap(CloudLogHandler.init(label:))
        let users = try Self.readUsers(usersFile)
        var permissions = Permissions.open
        if let permissionsFile {
            let text: String
            do {
                text = try String(contentsOfFile: permissionsFile, encoding: .utf8)
            } catch {
                throw ValidationError("cannot read the permissions file \(permissionsFile): \(error.localizedDescription)")
            }
            do {
                permissions = try Permissions(parsing: text, path: permissionsFile)
            } catch {
                throw ValidationError(error.description)
            }
        }
        var logger = Logger(label: "livegate-cloud")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        // Before the connection limit is worked out from it (--max-connections 0).
        ConnectionCap.raiseDescriptorLimit()
        let configuration = CloudConfiguration(
            host: host,
            port: port,
            storage: try storage.storage(),
            users: users,
            tokenLifetime: .seconds(tokenLifetime),
            refreshLifetime: .seconds(refreshLifetime),
            bcryptCost: UInt8(clamping: bcryptCost),
            faultInjection: faultInjection,
            eventRetention: eventRetention,
            permissions: permissions,
            admins: Set(admins),
            streams: streams,
            streamMessageLimit: streamMessageLimit,
            idleTimeout: .milliseconds(Int64(idleTimeout * 1000)),
            loginFailuresAllowed: loginFailuresAllowed,
            maxConnections: maxConnections > 0 ? maxConnections : nil
        )
        try await runCloud(configuration, logger: logger) { port in
            // One line on stdout, for scripts and tests that wait for the server.
            FileHandle.standardOutput.write(Data("livegate-cloud listening on \(configuration.host):\(port)\n".utf8))
        }
    }

    static func readUsers(_ path: String) throws -> [CloudConfiguration.User] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read the users file \(path): \(error.localizedDescription)")
        }
        var users: [CloudConfiguration.User] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let colon = trimmed.firstIndex(of: ":"), colon != trimmed.startIndex else {
                throw ValidationError("\(path):\(number + 1): expected 'username:password'")
            }
            users.append(.init(name: String(trimmed[..<colon]), password: String(trimmed[trimmed.index(after: colon)...])))
        }
        guard !users.isEmpty else { throw ValidationError("\(path) names no user") }
        return users
    }
}
