// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import NIOHTTP1
import Synchronization
import Testing

/// The cloud's batched API (`POST /v1/objects/read`, the realtime `batch` message) and the engine's use of
/// it: a burst of new observations costs a request per batch, not one per object.
@Suite(.serialized) struct BatchedCloudAPITests {
    @Test func aBatchedReadAnswersEachKeyAsItsOwnGetWould() async throws {
        var template = Array("/tmp/lgbatch-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed") }
        let rules = String(cString: made) + "/permissions"
        try "notes read *\nnotes write *\naudit write *\n".write(toFile: rules, atomically: true, encoding: .utf8)
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--permissions-file", rules])
        defer { cluster.stop() }
        let token = try await cluster.login()
        let n1 = try await cluster.put("notes", "n1", ["text": "one"], token: token)
        _ = try await cluster.put("notes", "n2", ["text": "two"], token: token)
        let deletion = try await cluster.call(.DELETE, CloudPath.object(EntityKey(collection: "notes", id: "n2")), token: token)
        let tombstone = try JSONDecoder().decode(Entity.self, from: Data(deletion.body.utf8))
        _ = try await cluster.put("audit", "a1", ["secret": true], token: token)
        let before = try await cluster.stats()

        let keys = ["notes/n1", "notes/n2", "notes/none", "audit/a1", "notes/n1"].map {
            let parts = $0.split(separator: "/")
            return EntityKey(collection: String(parts[0]), id: String(parts[1]))
        }
        let answer = try await cluster.call(
            .POST,
            CloudPath.readObjects,
            json: String(decoding: try JSONEncoder().encode(ReadObjectsRequest(keys: keys)), as: UTF8.self),
            token: token
        )
        #expect(answer.status == 200, "\(answer.body)")
        let results = try JSONDecoder().decode(ReadObjectsResponse.self, from: Data(answer.body.utf8)).results
        // One result per key, in the request's order, a repeated key answered twice.
        #expect(results.map(\.key) == keys)
        #expect(results[0].entity == n1 && results[0].error == nil)
        #expect(results[1].entity == nil && results[1].error?.code == .notFound && results[1].error?.currentVersion == tombstone.version)
        #expect(results[2].entity == nil && results[2].error?.code == .notFound && results[2].error?.currentVersion == nil)
        #expect(results[3].entity == nil && results[3].error?.code == .forbidden, "audit may be written, not read")
        #expect(results[4].entity == n1)
        // Counted as one request reading each readable key.
        let after = try await cluster.stats()
        #expect(after.readRequests == before.readRequests + 1)
        #expect(after.fetches["notes/n1"] == (before.fetches["notes/n1"] ?? 0) + 2)
        #expect(after.fetches["audit/a1"] == before.fetches["audit/a1"])

        // Refused as a whole: no keys, too many, an invalid name, no token.
        let tooMany = (0...ReadObjectsRequest.maximumKeys).map { #"{"collection":"notes","id":"k\#($0)"}"# }.joined(separator: ",")
        for body in [#"{"keys":[]}"#, #"{"keys":[\#(tooMany)]}"#, #"{"keys":[{"collection":"no such","id":"x"}]}"#, "{not json"] {
            let refused = try await cluster.call(.POST, CloudPath.readObjects, json: body, token: token)
            #expect(refused.status == 400, "\(refused.body)")
            #expect(try JSONDecoder().decode(ErrorResponse.self, from: Data(refused.body.utf8)).error.code == .badRequest)
        }
        #expect(try await cluster.call(.POST, CloudPath.readObjects, json: #"{"keys":[{"collection":"notes","id":"n1"}]}"#).status == 401)
    }

    @Test func aRealtimeBatchIsAnsweredRequestByRequestInOrder() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let before = try await cluster.stats()
        let topics = (0..<50).map { Topic.object(EntityKey(collection: "notes", id: "b\($0)")) }
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(
                RealtimeClientBatch(
                    requests: topics.enumerated().map { RealtimeClientMessage(op: .subscribe, ref: Int64($0.offset + 1), topic: $0.element) }
                )
            )
            for ref in 1...topics.count {
                let ack = try await next()
                #expect(ack.op == .ack && ack.ref == Int64(ref) && ack.seq != nil, "\(ack)")
            }
            // Every topic is subscribed: a write to the last one arrives.
            _ = try await cluster.put("notes", "b49", ["n": 1], token: token)
            let event = try await next()
            #expect(event.op == .event && event.topic == topics.last && event.entity?.data == ["n": 1])
            // Unsubscribing and resuming in one batch, each answered in turn.
            try await send(
                RealtimeClientBatch(requests: [
                    RealtimeClientMessage(op: .unsubscribe, ref: 100, topic: topics[0]),
                    RealtimeClientMessage(op: .subscribe, ref: 101, topic: topics[49], since: 0),
                ])
            )
            #expect(try await next().ref == 100)
            let resumed = try await next()
            #expect(resumed.ref == 101 && resumed.replayed == 1, "\(resumed)")
            #expect(try await next().entity?.data == ["n": 1], "the replay follows its ack")
            // A batch beyond the limit is refused whole, with no ref (nothing in it was done).
            let tooMany = (0...RealtimeClientBatch.maximumRequests).map {
                RealtimeClientMessage(op: .subscribe, ref: 200 + Int64($0), topic: topics[1])
            }
            try await send(RealtimeClientBatch(requests: tooMany))
            let refused = try await next()
            #expect(refused.op == .error && refused.ref == nil && refused.code == .badRequest, "\(refused)")
        }
        let after = try await cluster.stats()
        #expect(after.realtimeMessages == before.realtimeMessages + 3)
    }

    /// The engine's burst of new observations: every object fresh, in a few requests and realtime messages.
    @Test func manyNewObservationsAtOnceCostABatchedRequestEach() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let count = 400
        for n in 0..<count { _ = try await cluster.put("items", "i\(n)", ["n": .integer(n)], token: token) }
        let before = try await cluster.stats()
        try await withEngine(cluster) { engine in
            // Connected first: observations made before are subscribed (all at once) on connect instead.
            try await eventually("the engine is connected") { await engine.connectionStatus == .connected }
            let started = ContinuousClock.now
            let tokens = try await observeAllAtOnce(engine, count: count) { .object(["n": .integer($0)]) }
            print("batched: all fresh after \(ContinuousClock.now - started)")
            // Each object is read first and subscribed from its read: the subscriptions follow the data.
            try await eventually("every object subscribed", timeout: .seconds(30)) {
                try await cluster.stats().subscriptions.filter { $0.key.hasPrefix("object:items/") }.count == count
            }
            let after = try await cluster.stats()
            let reads = after.readRequests - before.readRequests
            let messages = after.realtimeMessages - before.realtimeMessages
            // One fetch and one subscription per object, carried by far fewer requests and messages.
            #expect(after.fetches.filter { $0.key.hasPrefix("items/") }.values.allSatisfy { $0 == 1 })
            #expect(after.subscriptions.filter { $0.key.hasPrefix("object:items/") }.count == count)
            #expect(reads <= count / 4, "\(reads) read requests for \(count) new observations")
            #expect(messages <= count / 4, "\(messages) realtime messages for \(count) new observations")
            print("batched: \(count) new observations, \(reads) read requests, \(messages) realtime messages")
            tokens.forEach { $0.invalidate() }
        }
    }
}

extension BatchedCloudAPITests {
    /// Observes `count` objects `items/i0…` all at once on `engine` (as a client's pipelined requests reach it)
    /// and waits until each was told fresh with the data `expected` gives it; returns the tokens.
    func observeAllAtOnce(
        _ engine: LiveClient,
        count: Int,
        expected: @escaping @Sendable (Int) -> JSONValue
    ) async throws -> [NotificationToken] {
        let fresh = FreshObjects()
        let tokens = await withTaskGroup(of: NotificationToken.self) { group in
            for n in 0..<count {
                group.addTask {
                    await engine.object(collection: "items", id: "i\(n)").observe { change in
                        guard change.dataStatus == .fresh, let snapshot = change.snapshot else { return }
                        fresh.data.withLock { $0[snapshot.key] = snapshot.data }
                    }
                }
            }
            var tokens: [NotificationToken] = []
            for await token in group { tokens.append(token) }
            return tokens
        }
        try await eventually("every object fresh with its last data", timeout: .seconds(60)) {
            fresh.data.withLock { data in
                (0..<count).allSatisfy { data[EntityKey(collection: "items", id: "i\($0)")] == expected($0) }
            }
        }
        return tokens
    }

    /// Writes `count` objects, observes them all from an engine (which caches each with its checkpoint) and stops
    /// it; then, while no engine runs, changes every `every`-th. Returns each object's data now.
    func cacheThenChange(_ cluster: TestCluster, count: Int, changingEvery every: Int) async throws -> @Sendable (Int) -> JSONValue {
        let token = try await cluster.login()
        for n in 0..<count { _ = try await cluster.put("items", "i\(n)", ["n": .integer(n)], token: token) }
        try await withEngine(cluster) { engine in
            try await eventually("the engine is connected") { await engine.connectionStatus == .connected }
            let tokens = try await observeAllAtOnce(engine, count: count) { .object(["n": .integer($0)]) }
            tokens.forEach { $0.invalidate() }
        }
        for n in stride(from: 0, to: count, by: every) {
            _ = try await cluster.put("items", "i\(n)", ["n": .integer(n), "changed": true], token: token)
        }
        return { n in n % every == 0 ? .object(["n": .integer(n), "changed": true]) : .object(["n": .integer(n)]) }
    }

    /// A restarted engine's burst of observations the cache holds, more than a realtime message carries: each
    /// resumes its topic from its checkpoint (the resumptions go out a message at a time, from a task per
    /// message) and the cloud replays what changed meanwhile. Every object ends fresh with its last data, none
    /// is fetched again, and the subscriptions took a few messages.
    @Test func aRestartedEnginesBurstOfCachedObservationsResumesEachTopicWithoutAFetch() async throws {
        let count = RealtimeClientBatch.maximumRequests + 500
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let expected = try await cacheThenChange(cluster, count: count, changingEvery: 10)
        let before = try await cluster.stats()
        try await withEngine(cluster) { engine in
            try await eventually("the engine is connected") { await engine.connectionStatus == .connected }
            let tokens = try await observeAllAtOnce(engine, count: count, expected: expected)
            try await eventually("every object subscribed", timeout: .seconds(30)) {
                try await cluster.stats().subscriptions.filter { $0.key.hasPrefix("object:items/") }.count == count
            }
            let after = try await cluster.stats()
            #expect(after.fetches.filter { $0.key.hasPrefix("items/") }.values.allSatisfy { $0 == 1 }, "resumed, not fetched again")
            let messages = after.realtimeMessages - before.realtimeMessages
            #expect(messages <= 10, "\(messages) realtime messages for \(count) resumed observations")
            tokens.forEach { $0.invalidate() }
        }
    }

    /// An engine stopped while a burst's subscriptions are in flight (its observations fresh from their reads, the
    /// subscriptions made after the reads not all answered) stops: every wait for an answer ends when the connection
    /// goes (``withEngine`` fails the test if the engine's run does not end). Five rounds, each on an empty cache. The
    /// waits were once registered outside their continuation's body, which can run after an executor switch: an
    /// answer, or the connection's loss, handled in between left a wait that nothing resumed (1 run in 6 hung, two
    /// runs side by side on a loaded machine).
    @Test func anEngineStoppedWhileABurstsSubscriptionsAreInFlightStops() async throws {
        let count = RealtimeClientBatch.maximumRequests + 500
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        for n in 0..<count { _ = try await cluster.put("items", "i\(n)", ["n": .integer(n)], token: token) }
        for _ in 0..<5 {
            try? FileManager.default.removeItem(atPath: cluster.directory + "/engine")
            try await withEngine(cluster) { engine in
                try await eventually("the engine is connected") { await engine.connectionStatus == .connected }
                let tokens = try await observeAllAtOnce(engine, count: count) { .object(["n": .integer($0)]) }
                tokens.forEach { $0.invalidate() }
            }
        }
    }

    /// The same burst when the cloud's log no longer reaches back to the checkpoints: every topic is subscribed
    /// from the cloud's head instead, and each object is read again.
    @Test func aRestartedEnginesBurstBeyondTheLogReadsEachObjectAgain() async throws {
        let count = RealtimeClientBatch.maximumRequests + 500
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--event-retention", "100"])
        defer { cluster.stop() }
        // While the engine is away, more writes than the log keeps.
        let expected = try await cacheThenChange(cluster, count: count, changingEvery: 5)
        try await withEngine(cluster) { engine in
            try await eventually("the engine is connected") { await engine.connectionStatus == .connected }
            let tokens = try await observeAllAtOnce(engine, count: count, expected: expected)
            let after = try await cluster.stats()
            #expect(after.fetches.filter { $0.key.hasPrefix("items/") }.values.allSatisfy { $0 == 2 }, "each read again")
            tokens.forEach { $0.invalidate() }
        }
    }
}

/// The data of each object seen fresh, by key.
final class FreshObjects: Sendable {
    let data = Mutex<[EntityKey: JSONValue]>([:])
}
