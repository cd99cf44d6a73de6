// Licensed under the Apache License, Version 2.0.

import Foundation

/// The installed package under the real service manager: `scripts/install` staged, copied onto an overlay of
/// `/`, and systemd booted on it as PID 1 of new namespaces (`scripts/systemd-sandbox`). Commands run inside
/// through `nsenter`, as root or as a user of the sandbox.
final class SystemdSandbox: Sendable {
    /// The repository (for `scripts/`).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let script = repository + "/scripts/systemd-sandbox"
    /// How `scripts/install` and `scripts/package-deb` take the build the tests run from: `--debug` when the
    /// binaries are the debug build's, nothing for the release build's (`scripts/test` runs the suite on it).
    static let buildFlags: [String] =
        URL(fileURLWithPath: TestCluster.binDirectory).resolvingSymlinksInPath().lastPathComponent == "debug" ? ["--debug"] : []

    /// Why this machine cannot boot the sandbox; `nil` when it can.
    static let unavailableReason: String? = {
        guard let result = try? runToCompletion(script, ["check"]) else { return "scripts/systemd-sandbox could not run" }
        return result.status == 0 ? nil : result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    /// The host's PID of the sandbox's systemd.
    let pid: String
    /// Shared with the sandbox, where it is `/mnt/sandbox`.
    let directory: String

    private init(pid: String, directory: String) {
        self.pid = pid
        self.directory = directory
    }

    /// Stages an install (the build the tests run from, `scripts/install [--debug] --no-build`) and boots it;
    /// with `staging: false`, boots the image with nothing of livegate installed (the packages' tests install
    /// them inside). It is halted within a second of `owner` ending (by default this test process): a run killed
    /// before a test's ``halt()`` leaves no booted systemd behind.
    static func boot(staging: Bool = true, owner: Int32 = ProcessInfo.processInfo.processIdentifier) throws -> SystemdSandbox {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lg-sandbox-\(UUID().uuidString.prefix(8))").path
        let stage = directory + "/stage"
        try FileManager.default.createDirectory(atPath: stage, withIntermediateDirectories: true)
        if staging {
            let install = try runToCompletion(
                repository + "/scripts/install",
                buildFlags + ["--no-build"],
                environment: ["DESTDIR": stage, "PREFIX": "/usr"]
            )
            guard install.status == 0 else { throw ClusterError("scripts/install failed: \(install.output)") }
        }
        let boot = try runToCompletion(script, ["boot", stage, directory + "/run", String(owner)])
        guard boot.status == 0, let pid = boot.output.split(separator: "\n").last.map(String.init), Int(pid) != nil else {
            throw ClusterError("the sandbox did not boot: \(boot.output)")
        }
        return SystemdSandbox(pid: pid, directory: directory + "/run")
    }

    /// Runs a shell command inside, as root or as `user` (a login-like environment: its groups, its home).
    @discardableResult
    func shell(_ command: String, as user: String? = nil, input: String? = nil, environment: [String: String] = [:]) throws -> (
        status: Int32, output: String
    ) {
        var arguments = ["run", pid]
        if let user { arguments += ["/usr/sbin/runuser", "-u", user, "--"] }
        arguments += ["/usr/bin/env"] + environment.map { "\($0.key)=\($0.value)" } + ["/bin/bash", "-c", command]
        // Always a standard input of its own (empty unless given), never the test runner's.
        return try runToCompletion(Self.script, arguments, input: input ?? "")
    }

    /// The journal's entries matching `matches` (e.g. `["-u", "livegated", "MESSAGE_ID=..."]`), as JSON objects.
    func journal(_ matches: [String]) throws -> [[String: String]] {
        let output = try shell("journalctl --no-pager -o json " + matches.map { "'\($0)'" }.joined(separator: " ")).output
        return output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object.compactMapValues { $0 as? String }
        }
    }

    /// Kills the sandbox's systemd; its namespaces, overlay and processes go with it.
    func halt() {
        _ = try? runToCompletion(Self.script, ["halt", pid])
        if ProcessInfo.processInfo.environment["LIVEGATE_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent)
        }
    }
}
