// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// systemd integration without PID 1: the notify protocol over a datagram socket named by NOTIFY_SOCKET,
/// socket activation through systemd-socket-activate, reload, watchdog, configuration checks.
@Suite(.serialized) struct SystemdTests {
    /// Receives datagrams until one satisfies `predicate`; returns all of them.
    func datagrams(_ cluster: TestCluster, until predicate: (String) -> Bool, timeout: Duration = .seconds(20)) async throws -> [String] {
        var received: [String] = []
        while true {
            let datagram = try await cluster.receiveDatagram(timeout: timeout)
            received.append(datagram)
            if predicate(datagram) { return received }
        }
    }

    @Test func notifyMessagesComeInOrder() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let first = try await cluster.startDaemon()
        #expect(first.count == 1, "READY=1 is the first message: \(first)")
        #expect(first[0].hasPrefix("READY=1\nSTATUS=cloud session "), "\(first)")
        #expect(first[0].hasSuffix("; on \(cluster.socketPath)"), "READY=1 names the socket served: \(first)")

        // STATUS= follows and is kept current: a connected client shows up in it.
        _ = try await datagrams(cluster) { $0.hasPrefix("STATUS=cloud session") }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"notes","id":"s"}}"#)
            _ = try await raw.next()
            // Kept current: once the session and the link are up, the line says so, with the client and its token.
            let status = try await datagrams(cluster) {
                $0 == "STATUS=cloud session established, realtime connected; 1 clients, 1 tokens; on \(cluster.socketPath)"
            }
            #expect(status.allSatisfy { $0.hasPrefix("STATUS=") || $0 == "WATCHDOG=1" })
        }

        cluster.signalDaemon(SIGTERM)
        let last = try await datagrams(cluster) { $0.hasPrefix("STOPPING=1") }
        #expect(last.last == "STOPPING=1\nSTATUS=shutting down")
        #expect(cluster.stopDaemon() == 0)
    }

    @Test func socketActivationAdoptsThePassedSocket() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let activationSocket = cluster.directory + "/activated.sock"
        // systemd-socket-activate binds the socket and starts the daemon at the first connection; the
        // daemon's own --socket points elsewhere, so only an adopted socket can answer here.
        let answer = ClusterBox<String>()
        try await cluster.startDaemon(
            launcher: ["/usr/bin/systemd-socket-activate", "-l", activationSocket, "-E", "NOTIFY_SOCKET"],
            beforeReady: {
                try await eventually("systemd-socket-activate to listen") { FileManager.default.fileExists(atPath: activationSocket) }
                let line = try await RawConnection.with(activationSocket) { raw in
                    try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"t","protocol":1}}"#)
                    return try await raw.next()
                }
                answer.set(line)
            }
        )
        #expect(answer.get()?.contains(#""daemon":"livegated""#) == true)
        #expect(!FileManager.default.fileExists(atPath: cluster.socketPath), "the daemon did not bind its own socket")
        #expect(cluster.daemonLog.contains("serving on the socket passed by systemd"))
    }

    @Test func watchdogPingsStopWhileAnEventLoopIsWedged() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        // WATCHDOG_USEC = 400 ms: a ping every 200 ms while healthy.
        try await cluster.startDaemon(extraArguments: ["--test-hooks"], environment: ["WATCHDOG_USEC": "400000"])
        _ = try await datagrams(cluster, until: { $0 == "WATCHDOG=1" }, timeout: .seconds(5))
        _ = try await datagrams(cluster, until: { $0 == "WATCHDOG=1" }, timeout: .seconds(5))

        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"debug.wedgeEventLoop","params":{"milliseconds":3500}}"#)
            #expect(try await raw.next().contains(#""wedgedLoops""#))
        }
        // Pings queued before the wedge, and one from a health check already past the wedged loop, arrive
        // at once: drain them. After that, silence until the loop runs again.
        let settled = ContinuousClock.now + .milliseconds(500)
        while ContinuousClock.now < settled {
            _ = try? await cluster.receiveDatagram(timeout: .milliseconds(100))
        }
        var pingsWhileWedged = 0
        let wedgeEnds = ContinuousClock.now + .milliseconds(2000)
        while ContinuousClock.now < wedgeEnds {
            guard let datagram = try? await cluster.receiveDatagram(timeout: .milliseconds(200)) else { continue }
            if datagram == "WATCHDOG=1" { pingsWhileWedged += 1 }
        }
        #expect(pingsWhileWedged == 0, "pings went on while an event loop was wedged: \(pingsWhileWedged)")
        // Once the loop runs again, so do the pings.
        _ = try await datagrams(cluster, until: { $0 == "WATCHDOG=1" }, timeout: .seconds(5))
    }

    @Test func reloadAppliesAValidConfigAndKeepsTheOldOneOnAnInvalidOne() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let configPath = cluster.directory + "/livegated.conf"
        try "log-level = info\nmax-frame-bytes = 4096\n".write(toFile: configPath, atomically: true, encoding: .utf8)
        try await cluster.startDaemon(extraArguments: ["--config", configPath])

        func maxFrameBytes() async throws -> Int {
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "t") { $0.hello.limits.maxFrameBytes }
        }
        #expect(try await maxFrameBytes() == 4096)

        try await RawConnection.with(cluster.socketPath) { kept in
            // Say hello first, so the connection is surely established before the reload.
            try await kept.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"client":"kept","protocol":1}}"#)
            #expect(try await kept.next().contains(#""maxFrameBytes":4096"#))
            try "log-level = debug\nmax-frame-bytes = 8192\n".write(toFile: configPath, atomically: true, encoding: .utf8)
            cluster.signalDaemon(SIGHUP)
            let reload = try await datagrams(cluster) { $0.hasPrefix("READY=1") }
            #expect(reload.contains { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") })
            // The READY=1 that ends the reload says how things are now, not a fixed line.
            #expect(reload.last?.hasPrefix("READY=1\nSTATUS=cloud session ") == true, "\(reload)")
            #expect(reload.last?.contains("; 1 clients, 0 tokens; on \(cluster.socketPath)") == true, "\(reload)")
            #expect(try await maxFrameBytes() == 8192, "new connections get the new limits")
            // The connection opened before the reload was not dropped.
            try await kept.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"kept","protocol":1}}"#)
            #expect(try await kept.next().contains(#""maxFrameBytes":4096"#))
        }

        try "log-level = loud\nmax-frame-bytes = 2048\n".write(toFile: configPath, atomically: true, encoding: .utf8)
        cluster.signalDaemon(SIGHUP)
        _ = try await datagrams(cluster) { $0.hasPrefix("READY=1") }
        #expect(try await maxFrameBytes() == 8192, "an invalid file changes nothing")
        #expect(cluster.daemonLog.contains("configuration rejected; the running settings are kept"))
        #expect(cluster.daemonLog.contains("livegated.conf:1: log-level must be one of"))
    }

    @Test func aSocketTheDaemonBindsGetsTheModeAndGroupAsked() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        // Group 1 (daemon on Debian): any group but the daemon's own; only root may give the socket to it.
        let group = getuid() == 0 ? ["--socket-group", "1"] : []
        try await cluster.startDaemon(extraArguments: ["--socket-mode", "0600"] + group)
        let attributes = try FileManager.default.attributesOfItem(atPath: cluster.socketPath)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.intValue == (getuid() == 0 ? 1 : Int(getgid())))
        let bad = try runToCompletion(TestCluster.binDirectory + "/livegated", ["--socket-mode", "0400", "--cloud-url", "http://127.0.0.1:1"])
        #expect(bad.status == 64 && bad.output.contains("leaves the daemon's own user unable to use its socket"), "\(bad.output)")
    }

    @Test func checkConfigValidatesAFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lgconf-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("systemd/livegated.conf.example").path
        let bad = directory.appendingPathComponent("bad.conf").path
        try "cloud-url = https://cloud.example.com\nmax-stall-seconds = forever\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let typo = directory.appendingPathComponent("typo.conf").path
        try "log_level = info\n".write(toFile: typo, atomically: true, encoding: .utf8)

        func check(_ path: String) throws -> (status: Int32, output: String) {
            try runToCompletion(TestCluster.binDirectory + "/livegated", ["--check-config", path])
        }
        #expect(try check(example).status == 0, "the shipped example is valid")
        let badResult = try check(bad)
        #expect(badResult.status == 1)
        #expect(badResult.output.contains("bad.conf:2: max-stall-seconds must be a whole number from 1 to 3600, not forever"))
        let typoResult = try check(typo)
        #expect(typoResult.status == 1)
        #expect(typoResult.output.contains("typo.conf:1: unknown setting log_level"))
    }

    @Test func theCloudPasswordComesFromTheCredentialsDirectory() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let credentials = cluster.directory + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try "\(TestCluster.password)\n".write(toFile: credentials + "/cloud-password", atomically: true, encoding: .utf8)
        try await cluster.startDaemon(environment: ["CREDENTIALS_DIRECTORY": credentials])
        #expect(!cluster.daemonLog.contains("--password-file"))
        try await eventually("the cloud session, with the password from $CREDENTIALS_DIRECTORY") {
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "t") { $0.hello.session } == "established"
        }
    }

    @Test func theCloudPasswordAppearsInNoOutput() async throws {
        let cluster = try await TestCluster.start()
        var everything: [String] = []
        do {
            defer { cluster.stop() }
            try await cluster.put("notes", "secret", ["x": 1])
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "scan") { daemon in
                let changes = Queue(try await daemon.observeObject(collection: "notes", id: "secret").changes)
                let seen = try await change(changes, "fresh") { $0.dataStatus == .fresh }
                everything.append("\(seen)")
                _ = try await daemon.update(collection: "notes", id: "secret", data: ["x": 2])
                do {
                    _ = try await daemon.create(collection: "notes", id: "secret", data: ["x": 3])
                } catch {
                    everything.append("\(error)")
                }
            }
            try await RawConnection.with(cluster.socketPath) { raw in
                try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"scan","protocol":1}}"#)
                everything.append(try await raw.next())
            }
            cluster.signalDaemon(SIGTERM)
            everything += try await datagrams(cluster) { $0.hasPrefix("STOPPING=1") }
            cluster.stopDaemon()
            everything.append(cluster.daemonLog)
            everything.append(cluster.cloudLog)
        }
        #expect(everything.joined().count > 1000, "there was output to scan")
        for text in everything {
            #expect(!text.contains(TestCluster.password), "the password leaked into: \(text.prefix(200))")
        }
    }
}

/// A value set once from a closure that cannot return it.
final class ClusterBox<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)
    func set(_ new: Value) { value.withLock { $0 = new } }
    func get() -> Value? { value.withLock { $0 } }
}

/// SIGTERM while writes are pipelined: every write the daemon performed is answered before
/// `connection.closing`, and no write is performed without an answer.
@Suite(.serialized) struct ShutdownTests {
    @Test func sigtermWithWritesInFlightLosesNone() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let answered = try await RawConnection.with(cluster.socketPath) { raw -> Int in
            var batch = ""
            for n in 1...300 {
                batch +=
                    #"{"jsonrpc":"2.0","id":\#(n),"method":"object.update","params":{"collection":"notes","id":"burst","data":{"n":\#(n)}}}"# + "\n"
            }
            try await raw.sendBytes(ByteBuffer(string: batch))
            _ = try await raw.next()  // the first answer: writes are under way
            cluster.signalDaemon(SIGTERM)
            var answered = 1
            while true {
                let line = try await raw.next()
                if line.contains(#""method":"connection.closing""#) { break }
                #expect(line.contains(#""result":{"snapshot""#), "every answer before closing is a success: \(line)")
                answered += 1
            }
            return answered
        }
        #expect(cluster.stopDaemon() == 0)
        // The cloud holds exactly the writes that were answered: none lost, none performed unanswered.
        let stored = try await cluster.get("notes", "burst")
        #expect(stored.version == Int64(answered))
        #expect(stored.data == ["n": .integer(answered)])
    }
}

/// Clients connecting while SIGTERM arrives: every connection the daemon accepted is served or closed, and
/// the daemon exits 0. (A connection accepted but not yet taken from the listener's stream used to be
/// dropped unclosed at shutdown, which NIO traps on: "Deinited NIOAsyncWriter without calling finish()".)
@Suite(.serialized) struct ShutdownUnderConnectsTests {
    /// Connects to `path` again and again from `threads` threads until the socket refuses; the descriptors.
    final class Connector: Sendable {
        private let descriptors = Mutex<[Int32]>([])
        private let stopped = Atomic<Bool>(false)
        private let done = DispatchGroup()

        init(path: String, threads: Int) {
            for _ in 0..<threads {
                done.enter()
                Thread.detachNewThread { [self] in
                    defer { done.leave() }
                    while !stopped.load(ordering: .relaxed) {
                        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                        guard fd >= 0 else { return }
                        var address = sockaddr_un()
                        address.sun_family = sa_family_t(AF_UNIX)
                        withUnsafeMutableBytes(of: &address.sun_path) { raw in
                            path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count - 1))) }
                        }
                        let connected = withUnsafePointer(to: &address) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                            }
                        }
                        guard connected == 0 else {
                            close(fd)
                            return
                        }
                        descriptors.withLock { $0.append(fd) }
                    }
                }
            }
        }

        var count: Int { descriptors.withLock { $0.count } }

        /// Stops connecting, waits for the threads and returns the connected descriptors.
        func finish() -> [Int32] {
            stopped.store(true, ordering: .relaxed)
            done.wait()
            return descriptors.withLock { $0 }
        }
    }

    @Test func connectionsArrivingAsSIGTERMLandAreClosedAndTheDaemonExitsCleanly() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        var random = SystemRandomNumberGenerator()
        for round in 1...6 {
            if round > 1 { try await cluster.startDaemon() }
            let connector = Connector(path: cluster.socketPath, threads: 4)
            let before = Int.random(in: 0..<120, using: &random)
            try await eventually("\(before) connections", timeout: .seconds(20)) { connector.count >= before }
            // SIGTERM now, while the connectors go on until the daemon stops accepting. None of these clients
            // has a request in flight, so the daemon has nothing to wait for (it takes ~0.1 s here).
            let problem = cluster.stopDaemonCleanly(deadline: .seconds(5))
            let descriptors = connector.finish()
            #expect(problem == nil, "round \(round), SIGTERM after \(before) connections: \(problem ?? "")")
            // Every connection ended: the daemon is gone, and nothing it started holds a client's socket.
            for fd in descriptors {
                var tv = timeval(tv_sec: 10, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 4096)
                var ended = false
                while true {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n > 0 { continue }
                    ended = n == 0 || errno == ECONNRESET
                    break
                }
                #expect(ended, "round \(round): a client's connection did not end (errno \(errno))")
                close(fd)
            }
            if problem != nil { return }
        }
    }
}
