// Licensed under the Apache License, Version 2.0.

import Foundation
import Testing

/// A sandbox outlives no test run: `scripts/systemd-sandbox boot … OWNER_PID` halts it once its owner ends (the
/// test process, for the other suites). Here the owner is a process of the test's own, ended while the sandbox
/// runs.
@Suite(.serialized, .enabled(if: SystemdSandbox.unavailableReason == nil, "cannot boot systemd here: \(SystemdSandbox.unavailableReason ?? "")"))
struct SystemdSandboxTests {
    @Test(.timeLimit(.minutes(2))) func aSandboxIsHaltedOnceItsOwnerEnds() async throws {
        let owner = try Self.spawnSleep()
        var reaped = false
        defer { if !reaped { kill(owner, SIGKILL); waitpid(owner, nil, 0) } }
        let sandbox = try SystemdSandbox.boot(staging: false, owner: owner)
        defer { sandbox.halt() }
        let systemd = "/proc/\(sandbox.pid)"
        #expect(try sandbox.shell("test \"$(cat /proc/1/comm)\" = systemd").status == 0)
        // While the owner runs, the sandbox stays (its watcher looks every second).
        try await Task.sleep(for: .seconds(2))
        #expect(FileManager.default.fileExists(atPath: systemd))
        kill(owner, SIGKILL)
        waitpid(owner, nil, 0)
        reaped = true
        try await eventually("the sandbox halted after its owner ended", timeout: .seconds(15)) {
            !FileManager.default.fileExists(atPath: systemd)
        }
    }

    /// `sleep 600`, holding none of this process's descriptors but /dev/null as its standard ones. Not a Foundation
    /// `Process`: a copy of the descriptor such a process is watched through, held by another process, hangs the
    /// wait for its end.
    private static func spawnSleep() throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { Int32($0) }
        for descriptor in open where descriptor > 2 && fcntl(descriptor, F_GETFD) != -1 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("600"), nil]
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, "/bin/sleep", &actions, nil, arguments, environ)
        guard code == 0 else { throw ClusterError("posix_spawn of sleep failed: \(code)") }
        return pid
    }
}
