// Licensed under the Apache License, Version 2.0.

import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// Where a `livegate-cloud` instance keeps its data.
public enum CloudStorage: Sendable {
    /// One SQLite file (created if missing): the default, for a single instance.
    case sqlite(path: String)
    /// A PostgreSQL database, which several instances may share (each delivers the others' realtime events).
    case postgres(PostgresClient.Configuration)

    /// A PostgreSQL database named by a URL in libpq's form:
    /// `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?host=/socket/dir&sslmode=disable|prefer|require]`.
    /// A `host` parameter naming a directory connects over that directory's Unix socket (`.s.PGSQL.PORT`).
    /// Without a password in the URL, `PGPASSWORD` from `environment` is used, if set. TLS defaults to
    /// `prefer` over TCP and off over a Unix socket.
    public static func postgres(url text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> CloudStorage {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql" else {
            throw CloudStorageError("not a PostgreSQL URL (postgresql://USER@HOST/DATABASE): \(redacted(text))")
        }
        let parameters = Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        let user = url.user.flatMap { $0.removingPercentEncoding } ?? environment["PGUSER"] ?? "postgres"
        let password = url.password.flatMap { $0.removingPercentEncoding } ?? environment["PGPASSWORD"]
        let database = url.path.count > 1 ? String(url.path.dropFirst()).removingPercentEncoding : nil
        let port = url.port ?? 5432
        let socketDirectory = parameters["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            let host = parameters["host"] ?? url.host ?? "localhost"
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: .disable)
        }
        switch parameters["sslmode"] ?? (socketDirectory == nil ? "prefer" : "disable") {
        case "disable": configuration.tls = .disable
        case "prefer", "allow": configuration.tls = .prefer(.makeClientConfiguration())
        case "require", "verify-ca", "verify-full": configuration.tls = .require(.makeClientConfiguration())
        case let mode: throw CloudStorageError("sslmode must be disable, prefer or require (got \(mode))")
        }
        return .postgres(configuration)
    }

    /// The URL with its password replaced, for messages and logs.
    public static func redacted(_ text: String) -> String {
        guard var url = URLComponents(string: text), url.password != nil else { return text }
        url.password = "***"
        return url.string ?? "(unprintable URL)"
    }
}

/// A storage setting that cannot be used; the message says why.
public struct CloudStorageError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension CloudStorage {
    /// Opens the store for a one-off job that publishes nothing (seeding), runs `body`, and closes it.
    func withStore<Result: Sendable>(logger: Logger, _ body: (any CloudStore) async throws -> Result) async throws -> Result {
        switch self {
        case .sqlite(let path):
            let store = try SQLiteStore(path: path) { _, _ in }
            defer { try? store.close() }
            return try await body(store)
        case .postgres(let configuration):
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                return try await body(try await PostgresStore(client: client, logger: logger))
            }
        }
    }
}
