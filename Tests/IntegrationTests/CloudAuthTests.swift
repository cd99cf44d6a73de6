// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import NIOCore
import NIOHTTP1
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
        request.body = .bytes(ByteBuffer(string: #"{"username":"bob","password":"correct horse battery staple"}"#))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        #expect(response.status == .ok)
    }
}
