// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Testing

/// Per-collection permissions in the cloud: 403 over REST and on realtime subscriptions, and what a daemon
/// client sees when the daemon's user is refused.
@Suite(.serialized) struct CloudPermissionsTests {
    static let rules = """
        # collection  access  users   (rules only allow; what no rule allows is refused)
        notes         read    *
        notes         write   \(TestCluster.username)
        audit         read    nobody-else
        """

    func cluster() async throws -> TestCluster {
        var template = Array("/tmp/lgperm-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed") }
        let path = String(cString: made) + "/permissions"
        try Self.rules.write(toFile: path, atomically: true, encoding: .utf8)
        return try await TestCluster.start(cloudArguments: ["--permissions-file", path])
    }

    @Test func restRequestsOutsideThePermissionsAre403() async throws {
        let cluster = try await cluster()
        defer { cluster.stop() }
        let token = try await cluster.login()
        #expect(
            try await cluster.call(.PUT, CloudPath.object(EntityKey(collection: "notes", id: "n")), json: #"{"data":{}}"#, token: token).status == 201
        )
        let refusedWrite = try await cluster.call(
            .PUT,
            CloudPath.object(EntityKey(collection: "other", id: "o")),
            json: #"{"data":{}}"#,
            token: token
        )
        #expect(refusedWrite.status == 403)
        #expect(try JSONDecoder().decode(ErrorResponse.self, from: Data(refusedWrite.body.utf8)).error.code == .forbidden)
        #expect(try await cluster.call(.DELETE, CloudPath.object(EntityKey(collection: "other", id: "o")), token: token).status == 403)
        #expect(try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "notes", id: "n")), token: token).status == 200)
        #expect(try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "audit", id: "a")), token: token).status == 403)
        #expect(try await cluster.call(.GET, CloudPath.objects("audit"), token: token).status == 403)
    }

    @Test func throughTheDaemonARefusalIsANotPermittedError() async throws {
        let cluster = try await cluster()
        defer { cluster.stop() }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "perm") { client in
            let error = await #expect(throws: LiveGateError.self) {
                _ = try await client.update(collection: "other", id: "o", data: ["x": 1])
            }
            #expect(error?.code == .notPermitted)
            // Reading a collection the daemon's user may not read: the observation reports the error.
            let changes = Queue(try await client.observeObject(collection: "audit", id: "a").changes)
            let failed = try await change(changes, "the refusal") { $0.loadingStatus == .error }
            #expect(failed.error?.code == .notPermitted, "\(failed)")
        }
    }
}
