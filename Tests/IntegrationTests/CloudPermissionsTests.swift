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
        try await clusterAndRules().cluster
    }

    /// A cluster whose cloud reads its permissions from `rules` (a file a test may rewrite, then restart the
    /// cloud for the change to take effect).
    func clusterAndRules() async throws -> (cluster: TestCluster, rules: String) {
        var template = Array("/tmp/lgperm-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed") }
        let path = String(cString: made) + "/permissions"
        try Self.rules.write(toFile: path, atomically: true, encoding: .utf8)
        return (try await TestCluster.start(cloudArguments: ["--permissions-file", path]), path)
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
            // Observing what the daemon's user may not read: the request fails, no token is made.
            try await cluster.daemonRealtimeConnected()
            for _ in 1...2 {
                let object = await #expect(throws: LiveGateError.self) {
                    _ = try await client.observeObject(collection: "audit", id: "a")
                }
                #expect(object?.code == .notPermitted, "\(String(describing: object))")
                let window = await #expect(throws: LiveGateError.self) {
                    _ = try await client.observeCollection(collection: "audit")
                }
                #expect(window?.code == .notPermitted, "\(String(describing: window))")
            }
            #expect(try await client.request(Method.daemonStats, [String: Int](), as: DaemonStats.self).observedObjects == 0)
            // What it may read is observed as ever.
            let notes = Queue(try await client.observeObject(collection: "notes", id: "n").changes)
            _ = try await change(notes, "the cloud's answer") { $0.loadingStatus == .loaded }
        }
    }

    /// Observers of a collection whose permission is revoked (the cloud restarted with new rules) hear the
    /// refusal, and their data is no longer `fresh`: nothing keeps it current.
    @Test func revokingAPermissionEndsTheFreshnessOfWhatWasObserved() async throws {
        let (cluster, rules) = try await clusterAndRules()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("notes", "n1", ["text": "readable"], token: token)
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "revoked") { client in
            let object = Queue(try await client.observeObject(collection: "notes", id: "n1").changes)
            _ = try await change(object, "fresh") { $0.dataStatus == .fresh && $0.loadingStatus == .loaded }
            let window = Queue(try await client.observeCollection(collection: "notes").updates)
            _ = try await elements(window, until: "fresh") { $0.change.dataStatus == .fresh && $0.change.loadingStatus == .loaded }

            try Self.rules.replacingOccurrences(of: "notes         read    *", with: "notes         read    nobody-else")
                .write(toFile: rules, atomically: true, encoding: .utf8)
            try await cluster.killAndRestartCloud()
            // A read racing the restart may first fail with the cloud unreachable: that is not the refusal.
            let refused = try await change(object, "the refusal") { $0.loadingStatus == .error && $0.error?.code != .cloudUnavailable }
            #expect(refused.error?.code == .notPermitted && refused.dataStatus == .error, "\(refused)")
            let windowRefused = try await elements(window, until: "the refusal") {
                $0.change.loadingStatus == .error && $0.change.error?.code != .cloudUnavailable
            }.last?.change
            #expect(windowRefused?.error?.code == .notPermitted && windowRefused?.dataStatus == .error, "\(String(describing: windowRefused))")
            // A new observation of it fails at once.
            try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
            let again = await #expect(throws: LiveGateError.self) { _ = try await client.observeObject(collection: "notes", id: "n2") }
            #expect(again?.code == .notPermitted)
        }
    }

    /// A feed whose subscription the cloud refuses when the daemon remakes it hears `error`, and nothing
    /// else until the cloud accepts it again: no `resync` for the refused connection. Once readable again
    /// (and the cloud still holding the events), the changes come with no resync at all.
    @Test func aFeedRefusedOnReconnectHearsItsErrorAndNoResyncAfterIt() async throws {
        let (cluster, rules) = try await clusterAndRules()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "feed") { client in
            let queue = Queue(try await client.subscribeFeed(collection: "notes").events)
            _ = try await elements(queue, until: "ready") { $0.event == .ready }

            // The daemon's user may not read notes any more: the cloud refuses the subscription on reconnect.
            try Self.rules.replacingOccurrences(of: "notes         read    *", with: "notes         read    nobody-else")
                .write(toFile: rules, atomically: true, encoding: .utf8)
            try await cluster.killAndRestartCloud()
            let refused = try await elements(queue, until: "the refusal") { $0.event == .error }
            #expect(refused.last?.error?.code == .notPermitted, "\(refused)")
            #expect(!refused.contains { $0.event == .resync }, "\(refused)")

            // Readable again: the daemon's next connection is accepted and resumes where the feed was.
            try Self.rules.write(toFile: rules, atomically: true, encoding: .utf8)
            try await cluster.killAndRestartCloud()
            try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
            let writer = try await cluster.login()
            try await cluster.put("notes", "n1", ["text": "back"], token: writer)
            let after = try await elements(queue, until: "the next change") { $0.event == .next }
            #expect(!after.contains { $0.event == .resync || $0.event == .error }, "after an error, no resync: \(after)")
            #expect(after.last?.snapshot?.data == ["text": "back"])
        }
    }
}
