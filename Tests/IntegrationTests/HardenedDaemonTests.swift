// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

private let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("scripts").path

/// The sandbox needs root, namespaces, setpriv and Debian's python3-seccomp.
private var canBuildTheSandbox: Bool {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
        FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")
    else { return false }
    let probe = Process()
    probe.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    probe.arguments = ["-c", "import seccomp"]
    probe.standardError = FileHandle(forWritingAtPath: "/dev/null")
    guard (try? probe.run()) != nil else { return false }
    probe.waitUntilExit()
    return probe.terminationStatus == 0
}

/// livegated under the restrictions of `systemd/livegated.service` that can be reproduced without systemd
/// as PID 1 (`scripts/run-hardened`: namespaces, an unprivileged user, no capabilities, a seccomp filter).
@Suite(.serialized, .enabled(if: canBuildTheSandbox, "needs root, unshare, setpriv and python3-seccomp"))
struct HardenedDaemonTests {
    @Test func theSandboxReallyRestricts() throws {
        var template = Array("/run/lgprobe-XXXXXX".utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let probe = #"""
            import json, mmap, os, socket
            r = {"uid": os.getuid()}
            try:
                open("/usr/lgprobe", "w"); r["systemWritable"] = True
            except OSError:
                r["systemWritable"] = False
            try:
                open("\#(directory)/ok", "w").write("x"); r["stateWritable"] = True
            except OSError:
                r["stateWritable"] = False
            try:
                socket.socket(socket.AF_NETLINK, socket.SOCK_RAW); r["netlink"] = True
            except OSError:
                r["netlink"] = False
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM); r["inet"] = True
            except OSError:
                r["inet"] = False
            try:
                mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC); r["writableExecutable"] = True
            except OSError:
                r["writableExecutable"] = False
            r["devices"] = sorted(os.listdir("/dev"))
            r["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
            r["root"] = os.listdir("/root")
            print(json.dumps(r))
            """#
        let probed = try runToCompletion(scripts + "/run-hardened", [directory, "--", "/usr/bin/python3", "-c", probe], includingErrors: false)
        #expect(probed.status == 0)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(probed.output.utf8)) as? [String: Any])
        #expect(result["uid"] as? Int == 65534, "not root")
        #expect(result["systemWritable"] as? Bool == false, "ProtectSystem=strict")
        #expect(result["stateWritable"] as? Bool == true, "the state directory stays writable")
        #expect(result["netlink"] as? Bool == false, "RestrictAddressFamilies")
        #expect(result["inet"] as? Bool == true, "the cloud is reachable")
        #expect(result["writableExecutable"] as? Bool == false, "MemoryDenyWriteExecute")
        #expect(result["devices"] as? [String] == ["fd", "full", "null", "random", "urandom", "zero"], "PrivateDevices")
        #expect(result["processes"] as? Int == 1, "ProtectProc=invisible: only its own process")
        #expect((result["root"] as? [String])?.isEmpty == true, "ProtectHome")
    }

    @Test func theDaemonServesUnderTheUnitsRestrictions() async throws {
        // Under /run: the sandbox gives the daemon a private /tmp.
        let cluster = try await TestCluster.start(startDaemon: false, under: "/run")
        defer { cluster.stop() }
        // Installed daemons live in /usr/bin; a build tree may be under /tmp, which the sandbox hides.
        let daemon = cluster.directory + "/livegated"
        try FileManager.default.copyItem(atPath: TestCluster.binDirectory + "/livegated", toPath: daemon)
        try await cluster.startDaemon(launcher: [scripts + "/run-hardened", cluster.directory, "--"], executable: daemon)
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "hard", ["text": "v1"])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "hardened") { daemon in
            let changes = Queue(try await daemon.observeObject(collection: "notes", id: "hard").changes)
            _ = try await change(changes, "fresh v1") { $0.dataStatus == .fresh && $0.snapshot?.version == 1 }
            try await cluster.put("notes", "hard", ["text": "v2"])
            _ = try await change(changes, "v2") { $0.snapshot?.version == 2 }
            let written = try await daemon.update(collection: "notes", id: "hard", data: ["text": "v3"])
            #expect(written.version == 3)
        }
        #expect(cluster.daemonLog.contains("seccomp-exec:"), "the filter was loaded")
        cluster.signalDaemon(SIGTERM)
        #expect(cluster.stopDaemon() == 0)
    }
}
