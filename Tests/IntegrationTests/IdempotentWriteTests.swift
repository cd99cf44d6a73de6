// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import Foundation
import LiveCloudAPI
import LiveJSON
import NIOCore
import NIOHTTP1
import Testing

/// `Idempotency-Key` on the cloud's object writes: a retried request is answered with the first one's
/// outcome and applies nothing, so a client whose answer was lost can retry without writing twice.
@Suite(.serialized) struct IdempotentWriteTests {
    /// A REST call with an `Idempotency-Key`.
    func write(_ cluster: TestCluster, _ method: HTTPMethod, _ path: String, json: String? = nil, token: String, key: String) async throws
        -> (status: Int, body: String)
    {
        var request = HTTPClientRequest(url: cluster.cloudURL + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Idempotency-Key", value: key)
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    /// The Idempotency-Key draft: a key is bound to its request's method, target and body. The same key on another
    /// request of the same object is 422 and does nothing (it answered for the first request before: a delete told
    /// "success" that deleted nothing); the same request with its body written otherwise is a replay.
    @Test func aKeyReplayedOnAnotherRequestIsRefusedAndDoesNothing() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let note = CloudPath.object(EntityKey(collection: "notes", id: "o"))
        let put = try await write(cluster, .PUT, note, json: #"{"data":{"n":1E6,"a":1}}"#, token: token, key: "K")
        #expect(put.status == 201, "\(put)")
        // The same value written otherwise (member order, spacing, the number's form): the first answer.
        let same = try await write(cluster, .PUT, note, json: #"{ "data" : { "a" : 1, "n" : 1000000.0 } }"#, token: token, key: "K")
        #expect(same.status == 201 && same.body == put.body, "\(same)")
        let deletion = try await write(cluster, .DELETE, note, token: token, key: "K")
        #expect(deletion.status == 422 && deletion.body.contains("idempotency_key_reused"), "\(deletion)")
        let changed = try await write(cluster, .PUT, note, json: #"{"data":{"n":2}}"#, token: token, key: "K")
        #expect(changed.status == 422, "\(changed)")
        let patched = try await write(cluster, .PATCH, note, json: #"{"data":{"n":1E6,"a":1}}"#, token: token, key: "K")
        #expect(patched.status == 422, "another method: \(patched)")
        let entity = try await cluster.get("notes", "o")
        #expect(!entity.deleted && entity.version == 1 && entity.data == ["a": 1, "n": 1_000_000.0])
    }

    /// The same request sent again while the first is still being applied (a client that gave up waiting and
    /// retried) waits for it and gets its answer: 20 at once, one write applied, the same answer for each (the
    /// IETF draft allows a 409 instead; waiting tells the client the outcome).
    @Test func aRetryWhileTheFirstIsInFlightGetsItsAnswer() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let note = CloudPath.object(EntityKey(collection: "notes", id: "flight"))
        let answers = try await withThrowingTaskGroup(of: (status: Int, body: String).self) { group in
            for _ in 0..<20 {
                group.addTask { try await self.write(cluster, .PUT, note, json: #"{"data":{"n":1},"ifVersion":0}"#, token: token, key: "flight-1") }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 201 && $0.body == answers[0].body }, "\(Set(answers.map { "\($0.status) \($0.body)" }))")
        #expect(try await cluster.get("notes", "flight").version == 1, "applied once")
    }

    @Test func aRepeatedKeyIsAnsweredWithTheFirstOutcomeAndAppliesNothing() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let note = CloudPath.object(EntityKey(collection: "notes", id: "k"))
        let first = try await write(cluster, .PUT, note, json: #"{"data":{"n":1},"ifVersion":0}"#, token: token, key: "write-1")
        #expect(first.status == 201)
        // The same request again (an ifVersion that no longer holds): the first answer, not a conflict.
        let again = try await write(cluster, .PUT, note, json: #"{"data":{"n":1},"ifVersion":0}"#, token: token, key: "write-1")
        #expect(again.status == 201 && again.body == first.body)
        #expect(try await cluster.get("notes", "k").version == 1)

        // A merge and a deletion, each retried: applied once.
        let merge = try await write(cluster, .PATCH, note, json: #"{"data":{"m":2}}"#, token: token, key: "write-2")
        #expect(try await write(cluster, .PATCH, note, json: #"{"data":{"m":2}}"#, token: token, key: "write-2").body == merge.body)
        let deletion = try await write(cluster, .DELETE, note, token: token, key: "write-3")
        #expect(deletion.status == 200)
        let deletedAgain = try await write(cluster, .DELETE, note, token: token, key: "write-3")
        #expect(deletedAgain.status == 200 && deletedAgain.body == deletion.body, "the tombstone again, not a 404")
        let tombstone = try JSONDecoder().decode(Entity.self, from: Data(deletion.body.utf8))
        #expect(tombstone.deleted && tombstone.version == 3)

        // A key is the user's name for one request: on another object it is refused (422, nothing done); a malformed
        // one is a 400.
        let other = CloudPath.object(EntityKey(collection: "notes", id: "other"))
        let reused = try await write(cluster, .PUT, other, json: #"{"data":{}}"#, token: token, key: "write-1")
        #expect(reused.status == 422 && reused.body.contains("write-1") && reused.body.contains("idempotency_key_reused"), "\(reused)")
        #expect(try await write(cluster, .PUT, other, json: #"{"data":{}}"#, token: token, key: "no spaces").status == 400)

        // The answer lost after the write was applied: the retry gets it.
        try await cluster.fault(#"{"loseWriteAnswers":1}"#)
        let lost = try await write(cluster, .PUT, other, json: #"{"data":{"x":1},"ifVersion":0}"#, token: token, key: "write-4")
        #expect(lost.status == 503)
        let retried = try await write(cluster, .PUT, other, json: #"{"data":{"x":1},"ifVersion":0}"#, token: token, key: "write-4")
        #expect(retried.status == 201)
        #expect(try await cluster.get("notes", "other").version == 1, "applied once")
    }
}
