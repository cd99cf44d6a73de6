// Licensed under the Apache License, Version 2.0.

import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Which storage a test's `livegate-cloud` runs on. `LIVEGATE_TEST_CLOUD=postgres` makes PostgreSQL the
/// default for every test that does not name one.
enum CloudBackend: String, CaseIterable, Sendable {
    case sqlite
    case postgres

    static var `default`: CloudBackend {
        CloudBackend(rawValue: ProcessInfo.processInfo.environment["LIVEGATE_TEST_CLOUD"] ?? "") ?? .sqlite
    }
}

/// A PostgreSQL server of the test run's own, on a Unix socket only. `scripts/test` starts one before the
/// tests (`scripts/lib/private-postgres.sh`) and names its socket directory in
/// `$LIVEGATE_TEST_PG_SOCKET_DIR`; without it (`swift test` run directly) the first test that needs one
/// starts it here — `initdb` into a temporary directory, `pg_ctl start` — and it is stopped
/// (`pg_ctl stop -m immediate`) when the test process exits. Each cloud gets a database of its own
/// (`createDatabase()`).
///
/// The server's programs are found in `$LIVEGATE_PG_BINDIR`, else the newest `/usr/lib/postgresql/*/bin`
/// (Debian's `postgresql` package, which `scripts/install-deps` installs). PostgreSQL refuses to run as
/// root; as root, its server programs run as the `postgres` user (created by that package) through `runuser`.
final class PrivatePostgres: Sendable {
    let directory: String
    let binDirectory: String
    private let nextDatabase = Atomic<Int>(0)

    /// The server, started the first time a test asks for it.
    static var shared: PrivatePostgres {
        get throws { try started.get() }
    }

    private static let started: Result<PrivatePostgres, any Error> = Result { try PrivatePostgres() }

    private init() throws {
        binDirectory = try Self.findBinDirectory()
        if let running = ProcessInfo.processInfo.environment["LIVEGATE_TEST_PG_SOCKET_DIR"] {
            directory = running
            return
        }
        var template = Array("/tmp/lgpg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed for PostgreSQL") }
        directory = String(cString: made)
        if geteuid() == 0 {
            guard let account = getpwnam("postgres") else {
                throw ClusterError("running as root, PostgreSQL needs the 'postgres' user (Debian's postgresql package creates it)")
            }
            chown(directory, account.pointee.pw_uid, account.pointee.pw_gid)
        }
        try runAsOwner("initdb", ["-D", directory + "/data", "--auth=trust", "--username=postgres", "--encoding=UTF8", "--no-locale"])
        PrivatePostgres.registerCleanup(stop: commandLine("pg_ctl", ["-D", directory + "/data", "stop", "-m", "immediate"]), directory: directory)
        try runAsOwner(
            "pg_ctl",
            [
                "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "start", "-o",
                "-k \(directory) -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
            ]
        )
    }

    /// A new, empty database; returns the URL `livegate-cloud --postgres` takes.
    func createDatabase() throws -> String {
        let name = "livegate_\(getpid())_\(nextDatabase.add(1, ordering: .relaxed).newValue)"
        try runClient("createdb", ["-h", directory, "-U", "postgres", name])
        return "postgresql://postgres@localhost/\(name)?host=\(directory)"
    }

    /// Ends every server process serving `database`'s clients (as a failover or a restart would): each
    /// client sees its connection closed.
    func terminateConnections(to databaseURL: String) throws {
        guard let name = URLComponents(string: databaseURL)?.path.dropFirst(), !name.isEmpty else {
            throw ClusterError("no database in \(databaseURL)")
        }
        try runClient(
            "psql",
            [
                "-h", directory, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c",
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)' AND pid <> pg_backend_pid()",
            ]
        )
    }

    private func commandLine(_ program: String, _ arguments: [String]) -> [String] {
        let command = [binDirectory + "/" + program] + arguments
        return geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + command : command
    }

    /// Runs a client program (createdb, psql) to completion; it connects as the `postgres` role over the socket.
    private func runClient(_ program: String, _ arguments: [String]) throws {
        let result = try runToCompletion(binDirectory + "/" + program, arguments)
        guard result.status == 0 else { throw ClusterError("\(program) failed (\(result.status)): \(result.output)") }
    }

    /// Runs one of the server's programs to completion as the server's owner, through `/bin/sh` and
    /// `waitpid` (`system`); its output goes to `commands.log` in the directory. Not through Foundation's
    /// `Process`: the server that `pg_ctl start` leaves running inherits the descriptor by which `Process`
    /// learns that its child ended, and `waitUntilExit()` would never return.
    private func runAsOwner(_ program: String, _ arguments: [String]) throws {
        let logPath = directory + "/commands.log"
        let status = system(Self.withoutInheritedDescriptors(Self.shellCommand(commandLine(program, arguments)) + " </dev/null >>'\(logPath)' 2>&1"))
        guard status == 0 else {
            let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw ClusterError("\(program) failed (status \(status)): \(output.suffix(2000))")
        }
    }

    /// The words of a command, each quoted for `/bin/sh`.
    private static func shellCommand(_ words: [String]) -> String {
        words.map(quoted).joined(separator: " ")
    }

    private static func quoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// `script`, for `system`, run by bash once it has closed every descriptor but 0, 1 and 2. `system` forks
    /// this process whole, and its descriptors without close-on-exec (NIO's sockets have none) went to the shell,
    /// to the server `pg_ctl start` leaves running, and to the shell that waits to stop it: a client connection
    /// that another test had open at that moment stayed open in them after the test closed it, and its peer never
    /// saw it end (`swift test` run directly, suites in parallel: FeedTests waited for the daemon to release a
    /// subscription whose clients had left).
    private static func withoutInheritedDescriptors(_ script: String) -> String {
        let closing = #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 2 ]; then exec {fd}>&-; fi; done"#
        return "/bin/bash -c " + quoted(closing + "; " + script)
    }

    private static func findBinDirectory() throws -> String {
        if let configured = ProcessInfo.processInfo.environment["LIVEGATE_PG_BINDIR"] { return configured }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = "/usr/lib/postgresql/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: bin + "/initdb") { return bin }
        }
        throw ClusterError(
            "no PostgreSQL server programs (initdb) under /usr/lib/postgresql/*/bin: install Debian's postgresql (scripts/install-deps does), or set LIVEGATE_PG_BINDIR"
        )
    }

    // MARK: Stopping at exit

    /// Stops the server and removes its directory once this test process has exited, however it exits: a
    /// shell in the background waits for it (the test runner did not run `atexit` handlers here).
    private static func registerCleanup(stop: [String], directory: String) {
        let pid = getpid()
        _ = system(
            withoutInheritedDescriptors(
                "(while kill -0 \(pid) 2>/dev/null; do sleep 1; done; \(shellCommand(stop)); rm -rf '\(directory)') </dev/null >/dev/null 2>&1 &"
            )
        )
    }
}
