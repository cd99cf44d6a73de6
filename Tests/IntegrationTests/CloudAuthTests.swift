// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// The cloud's authentication, over its REST API: bcrypt-checked passwords, refresh-token rotation, logout.
@Suite(.serialized) struct CloudAuthTests {
    func call(_ cluster: TestCluster, _ method: HTTPMethod, _ path: String, json: String? = nil, token: String? = nil) async throws
        -> (status: Int, body: String)
    {
        try await cluster.call(method, path, json: json, token: token)
    }

    func decode<T: Decodable>(_ type: T.Type, _ body: String) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(body.utf8))
    }

    /// Password checks run off the request path: during a storm of logins (each a bcrypt check of ~0.25 s at the
    /// default cost), other requests are answered at once (before, a GET sent 1 s into 40 logins waited 9.9 s on
    /// two cores). And a login takes as long for a user that does not exist as for a wrong password (before: ~1 ms
    /// against ~0.3 s, which told who exists).
    @Test func aLoginStormLeavesOtherRequestsTheirTurnAndTellsNoOneWhoExists() async throws {
        // Failed logins are not throttled here: the storm's are all checked (see failedLoginsWaitLonger...).
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--login-failures-allowed", "0"])
        defer { cluster.stop() }
        func timed(_ body: () async throws -> Void) async throws -> Duration {
            let start = ContinuousClock.now
            try await body()
            return ContinuousClock.now - start
        }
        func median(_ durations: [Duration]) -> Duration { durations.sorted()[durations.count / 2] }
        // Unknown users and wrong passwords, one at a time.
        var unknown: [Duration] = []
        var wrong: [Duration] = []
        for n in 0..<5 {
            unknown.append(
                try await timed {
                    let status = try await call(cluster, .POST, CloudPath.login, json: #"{"username":"nobody\#(n)","password":"x"}"#).status
                    #expect(status == 401)
                }
            )
            wrong.append(
                try await timed {
                    let status = try await call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"x\#(n)"}"#).status
                    #expect(status == 401)
                }
            )
        }
        let ratio = median(unknown) / median(wrong)
        #expect(ratio > 0.5 && ratio < 2, "unknown user \(median(unknown)), wrong password \(median(wrong))")

        // 24 logins at once, and GETs among them once the first login is answered (the others then wait their turn).
        final class Count: Sendable { let value = Mutex(0) }
        let answered = Count()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for n in 0..<24 {
                group.addTask {
                    let status = try await self.call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"storm\#(n)"}"#).status
                    answered.value.withLock { $0 += 1 }
                    return status
                }
            }
            try await eventually("the first login of the storm answered") { answered.value.withLock { $0 } > 0 }
            #expect(answered.value.withLock { $0 } < 20, "the storm is still under way")
            // A client of its own: the shared one's connections to the cloud are all busy with the logins.
            let probe = HTTPClient(eventLoopGroupProvider: .singleton)
            var during: [Duration] = []
            for _ in 0..<10 {
                during.append(
                    try await timed {
                        let response = try await probe.execute(HTTPClientRequest(url: cluster.cloudURL + CloudPath.stats), timeout: .seconds(20))
                        #expect(response.status == .ok)
                        _ = try await response.body.collect(upTo: 1 << 20)
                    }
                )
            }
            try await probe.shutdown()
            // One bcrypt check is ~0.25 s; queued behind the logins, a GET would wait seconds.
            #expect(during.allSatisfy { $0 < .milliseconds(200) }, "GETs during the storm: \(during)")
            for try await status in group { #expect(status == 401) }
        }
    }

    @Test func refreshRotatesAndLogoutRevokes() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let login = #"{"username":"\#(TestCluster.username)","password":"\#(TestCluster.password)"}"#
        let wrong = try await call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"nope"}"#)
        #expect(wrong.status == 401)
        #expect(try decode(ErrorResponse.self, wrong.body).error.code == .invalidCredentials)

        let first = try decode(LoginResponse.self, try await call(cluster, .POST, CloudPath.login, json: login).body)
        #expect(!first.refreshToken.isEmpty && first.refreshToken != first.accessToken)

        let renewed = try await call(cluster, .POST, CloudPath.refresh, json: #"{"refreshToken":"\#(first.refreshToken)"}"#)
        #expect(renewed.status == 200)
        let second = try decode(LoginResponse.self, renewed.body)
        #expect(second.accessToken != first.accessToken)
        let reused = try await call(cluster, .POST, CloudPath.refresh, json: #"{"refreshToken":"\#(first.refreshToken)"}"#)
        #expect(reused.status == 401, "a refresh token is used once")
        #expect(try decode(ErrorResponse.self, reused.body).error.code == .invalidRefreshToken)

        let object = CloudPath.object(EntityKey(collection: "notes", id: "auth"))
        #expect(try await call(cluster, .PUT, object, json: #"{"data":{"a":1}}"#, token: second.accessToken).status == 201)
        #expect(try await call(cluster, .POST, CloudPath.logout, token: second.accessToken).status == 204)
        let after = try await call(cluster, .GET, object, token: second.accessToken)
        #expect(after.status == 401, "logout revokes the access token")
        #expect(try decode(ErrorResponse.self, after.body).error.code == .unauthenticated)
        let revoked = try await call(cluster, .POST, CloudPath.refresh, json: #"{"refreshToken":"\#(second.refreshToken)"}"#)
        #expect(revoked.status == 401, "and its refresh token")

        let stats = try await cluster.stats()
        #expect(stats.logins == 1)
        #expect(stats.refreshes == 1)
    }

    /// The store names a token by its SHA-256 in hex, never by the token: the hashes are computed here with
    /// Python's hashlib, apart from the code under test, and compared with the cloud's token table.
    @Test func tokensAreStoredOnlyAsTheirSHA256() async throws {
        // On SQLite whatever store the run tests (its table is read from the file); both stores key by the same hash.
        let cluster = try await TestCluster.start(startDaemon: false, backend: .sqlite)
        defer { cluster.stop() }
        let login = #"{"username":"\#(TestCluster.username)","password":"\#(TestCluster.password)"}"#
        let issued = try decode(LoginResponse.self, try await call(cluster, .POST, CloudPath.login, json: login).body)
        let object = CloudPath.object(EntityKey(collection: "notes", id: "hash"))
        #expect(try await call(cluster, .PUT, object, json: #"{"data":{"a":1}}"#, token: issued.accessToken).status == 201)
        let script = """
            import hashlib, sqlite3, sys
            rows = {r[0]: r[1] for r in sqlite3.connect(sys.argv[1]).execute('select hash, kind from token')}
            for token in sys.argv[2:]:
                print(rows.get(hashlib.sha256(token.encode()).hexdigest(), 'missing'))
            print(any(token in row for row in rows for token in sys.argv[2:]))
            """
        let result = try runToCompletion(
            "/usr/bin/python3",
            ["-c", script, cluster.directory + "/cloud.sqlite", issued.accessToken, issued.refreshToken],
            includingErrors: false
        )
        #expect(result.output.split(separator: "\n") == ["access", "refresh", "False"], "\(result.output)")
    }

    @Test func aUsersFileMayHoldBcryptHashes() async throws {
        // The hash of "correct horse battery staple" at cost 4: the password is never stored in clear.
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        // The cluster's own users file holds the clear password; a second cloud reads a hashed one.
        let hashedUsers = cluster.directory + "/users-hashed"
        let hash = "$2b$04$5ZCF5eRT2o9FmdQOu9oCOOpd/7oND4IoU7tuu9aJn4pokHwvtlYFG"  // made with libcrypt, not by the code under test
        try "bob:\(hash)\n".write(toFile: hashedUsers, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestCluster.binDirectory + "/livegate-cloud")
        process.arguments = ["--port", "0", "--database", cluster.directory + "/second.sqlite", "--users-file", hashedUsers]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        let lines = LineReader(stdout.fileHandleForReading)
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let port = try await withTimeout(.seconds(30), "the second cloud's port") { () -> Int in
            for await line in lines.lines {
                if let range = line.range(of: "listening on 127.0.0.1:"), let port = Int(line[range.upperBound...]) { return port }
            }
            throw ClusterError("the second cloud exited")
        }
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)" + CloudPath.login)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"username":"bob","password":"correct horse battery staple"}"#))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        #expect(response.status == .ok)
    }

    /// After 5 failed logins of a name (or from an address), each further attempt waits: 429
    /// `too_many_failed_logins` with `Retry-After`, the password not even checked, the right one included;
    /// once the wait is over the right password logs in, and clears the count.
    @Test func failedLoginsWaitLongerAndLongerThenTheRightPasswordGetsIn() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--bcrypt-cost", "4"])
        defer { cluster.stop() }
        for n in 0..<6 {
            let wrong = try await call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"guess\#(n)"}"#)
            #expect(wrong.status == 401, "attempt \(n): \(wrong)")
        }
        var request = HTTPClientRequest(url: cluster.cloudURL + CloudPath.login)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"username":"alice","password":"\#(TestCluster.password)"}"#))
        let throttled = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = String(buffer: try await throttled.body.collect(upTo: 1 << 16))
        #expect(throttled.status == .tooManyRequests && body.contains(#""code":"too_many_failed_logins""#), "\(throttled.status) \(body)")
        #expect(throttled.headers.first(name: "Retry-After").flatMap(Int.init).map { (1...2).contains($0) } == true)
        try await eventually("the right password to get in once the wait is over", timeout: .seconds(10)) {
            try await self.call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"\#(TestCluster.password)"}"#).status
                == 200
        }
        // Cleared: a wrong password is a plain 401 again.
        #expect(try await call(cluster, .POST, CloudPath.login, json: #"{"username":"alice","password":"nope"}"#).status == 401)
    }
}
