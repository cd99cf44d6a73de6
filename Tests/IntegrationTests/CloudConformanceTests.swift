// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import Synchronization
import Testing

/// The real livegate-cloud against its spec (`Protocol/cloud/openapi.json`, `realtime.schema.json`): every
/// operation is exercised, in success and failure, and every answer is checked by `scripts/check-cloud-api`.
@Suite(.serialized) struct CloudConformanceTests {
    /// The exchanges made, one JSON line each, for the checker.
    final class Record: Sendable {
        private let lines = Mutex<[String]>([])

        func add(_ object: [String: Any]) {
            let data = try! JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed])
            lines.withLock { $0.append(String(decoding: data, as: UTF8.self)) }
        }

        var text: String { lines.withLock { $0.joined(separator: "\n") + "\n" } }
    }

    /// Calls the cloud and records the exchange under the spec's path template.
    @discardableResult
    func call(
        _ record: Record,
        _ cluster: TestCluster,
        _ method: HTTPMethod,
        _ template: String,
        _ path: String,
        json: String? = nil,
        token: String? = nil
    ) async throws -> (status: Int, body: String) {
        let response = try await cluster.call(method, path, json: json, token: token)
        let body: Any =
            response.body.isEmpty
            ? NSNull() : (try? JSONSerialization.jsonObject(with: Data(response.body.utf8), options: [.fragmentsAllowed])) ?? response.body
        record.add(["kind": "http", "method": method.rawValue, "path": template, "status": response.status, "body": body])
        return response
    }

    /// JSON nested deeper than the parser takes (512 levels, as Foundation's `JSONDecoder`), in a request body, a
    /// query's filter, a realtime frame and a query topic, is refused with a 400 or a realtime error, and the cloud
    /// goes on. (Foundation's decoder traps on 513 unclosed `[`: one such body stopped the cloud.)
    @Test func inputNestedPastTheParsersDepthIsRefusedAndTheCloudGoesOn() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--bcrypt-cost", "4"])
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let unclosed = String(repeating: "[", count: 513)
        let closed = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        let object = CloudPath.object(EntityKey(collection: "notes", id: "n1"))
        for body in [unclosed, closed, #"{"data":"# + unclosed, #"{"data":{"a":"# + closed + "}}"] {
            let answer = try await cluster.call(.PUT, object, json: body, token: alice)
            #expect(answer.status == 400, "\(answer)")
            #expect(try JSONDecoder().decode(ErrorResponse.self, from: Data(answer.body.utf8)).error.code == .badRequest)
        }
        for filter in [unclosed, #"{"a":"# + unclosed] {
            let path = CloudPath.objects("notes") + "?where=" + filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(try await cluster.call(.GET, path, token: alice).status == 400)
        }
        // A page cursor is base64 of JSON.
        let cursor = Data(unclosed.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        #expect(try await cluster.call(.GET, CloudPath.objects("notes") + "?after=" + cursor, token: alice).status == 400)
        try await withRealtimeConnection(to: cluster.cloudURL, token: alice) { send, next in
            try await send(RawRealtimeFrame(text: unclosed))
            let refused = try await next()
            #expect(refused.op == .error && refused.code == .badRequest)
            try await send(RawRealtimeFrame(text: #"{"op":"subscribe","ref":1,"topic":"query:notes?"# + unclosed + #""}"#))
            let topic = try await next()
            #expect(topic.op == .error && topic.code == .badRequest)
            // The connection, and the cloud, go on.
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: .object(EntityKey(collection: "notes", id: "n1"))))
            let ack = try await next()
            #expect(ack.op == .ack && ack.ref == 2)
        }
        #expect(try await cluster.put("notes", "n1", ["text": "still here"], token: alice).version == 1)
    }

    @Test func everyOperationAnswersAsTheSpecSays() async throws {
        let cluster = try await TestCluster.start(
            startDaemon: false,
            cloudArguments: ["--bcrypt-cost", "4", "--admin", "root", "--stream", "songs", "--stream-message-limit", "64"],
            otherUsers: ["bob", "root"]
        )
        defer { cluster.stop() }
        let record = Record()
        let r = record
        func json<T: Decodable>(_ type: T.Type, _ body: String) throws -> T { try JSONDecoder().decode(T.self, from: Data(body.utf8)) }

        // Auth.
        let login = CloudPath.login
        let signedIn = try await call(r, cluster, .POST, login, login, json: #"{"username":"alice","password":"\#(TestCluster.password)"}"#)
        #expect(signedIn.status == 200)
        let session = try json(LoginResponse.self, signedIn.body)
        let alice = session.accessToken
        #expect(try await call(r, cluster, .POST, login, login, json: #"{"username":"alice","password":"wrong"}"#).status == 401)
        #expect(try await call(r, cluster, .POST, login, login, json: "{not json").status == 400)
        let refresh = CloudPath.refresh
        #expect(try await call(r, cluster, .POST, refresh, refresh, json: #"{"refreshToken":"\#(session.refreshToken)"}"#).status == 200)
        #expect(try await call(r, cluster, .POST, refresh, refresh, json: #"{"refreshToken":"\#(session.refreshToken)"}"#).status == 401)
        let bob = try await cluster.login(as: "bob")
        let root = try await cluster.login(as: "root")

        // Objects.
        let object = "/v1/collections/{collection}/objects/{id}"
        let n1 = CloudPath.object(EntityKey(collection: "notes", id: "n1"))
        #expect(try await call(r, cluster, .PUT, object, n1, json: #"{"data":{"text":"a","rank":1}}"#, token: alice).status == 201)
        #expect(try await call(r, cluster, .PUT, object, n1, json: #"{"data":{"text":"b","rank":1}}"#, token: alice).status == 200)
        #expect(try await call(r, cluster, .PUT, object, n1, json: #"{"data":{"text":"c"},"ifVersion":1}"#, token: alice).status == 409)
        #expect(try await call(r, cluster, .PUT, object, n1, json: #"{"data":[1]}"#, token: alice).status == 400)
        #expect(try await call(r, cluster, .PUT, object, n1, json: #"{"data":{}}"#).status == 401)
        #expect(try await call(r, cluster, .PATCH, object, n1, json: #"{"data":{"tag":"x"}}"#, token: alice).status == 200)
        let missing = CloudPath.object(EntityKey(collection: "notes", id: "none"))
        #expect(try await call(r, cluster, .PATCH, object, missing, json: #"{"data":{"tag":"x"}}"#, token: alice).status == 404)
        #expect(try await call(r, cluster, .GET, object, n1, token: alice).status == 200)
        #expect(try await call(r, cluster, .GET, object, missing, token: alice).status == 404)
        let n2 = CloudPath.object(EntityKey(collection: "notes", id: "n2"))
        #expect(try await call(r, cluster, .PUT, object, n2, json: #"{"data":{"rank":2}}"#, token: alice).status == 201)
        let objects = "/v1/collections/{collection}/objects"
        let page = try await call(r, cluster, .GET, objects, CloudPath.objects("notes") + "?sort=rank&limit=1", token: alice)
        #expect(page.status == 200)
        let cursor = try #require(try json(QueryPage.self, page.body).nextCursor)
        #expect(
            try await call(r, cluster, .GET, objects, CloudPath.objects("notes") + "?sort=rank&limit=1&after=\(cursor)", token: alice).status == 200
        )
        #expect(try await call(r, cluster, .GET, objects, CloudPath.objects("notes") + "?where=nonsense", token: alice).status == 400)
        let access = "/v1/collections/{collection}/access"
        let notesAccess = try await call(r, cluster, .GET, access, CloudPath.access("notes"), token: alice)
        #expect(notesAccess.status == 200)
        #expect(try json(CollectionAccess.self, notesAccess.body) == CollectionAccess(collection: "notes", read: true, write: true))
        #expect(try await call(r, cluster, .GET, access, CloudPath.access("no%20such"), token: alice).status == 400)
        #expect(try await call(r, cluster, .GET, access, CloudPath.access("notes")).status == 401)
        let tombstone = try await call(r, cluster, .DELETE, object, n2, token: alice)
        #expect(tombstone.status == 200)
        #expect(try await call(r, cluster, .DELETE, object, n2, token: alice).status == 404)
        #expect(try await call(r, cluster, .PATCH, object, n2, json: #"{"data":{"tag":"x"}}"#, token: alice).status == 404)
        // A deleted object's 404 says the deletion's version.
        let gone = try await call(r, cluster, .GET, object, n2, token: alice)
        #expect(gone.status == 404)
        #expect(try json(ErrorResponse.self, gone.body).error.currentVersion == (try json(Entity.self, tombstone.body)).version)
        // Many objects in one read: each answered as its own GET would be.
        let read = CloudPath.readObjects
        let keys = #"{"keys":[{"collection":"notes","id":"n1"},{"collection":"notes","id":"n2"},{"collection":"notes","id":"none"}]}"#
        let batch = try await call(r, cluster, .POST, read, read, json: keys, token: alice)
        #expect(batch.status == 200)
        #expect(try json(ReadObjectsResponse.self, batch.body).results.map { $0.entity != nil } == [true, false, false])
        #expect(try await call(r, cluster, .POST, read, read, json: #"{"keys":[]}"#, token: alice).status == 400)
        #expect(try await call(r, cluster, .POST, read, read, json: keys).status == 401)

        // Streams.
        let streams = CloudPath.streams
        #expect(try await call(r, cluster, .GET, streams, streams, token: alice).status == 200)
        let stream = "/v1/streams/{stream}"
        #expect(try await call(r, cluster, .PUT, stream, CloudPath.stream("news"), token: root).status == 201)
        #expect(try await call(r, cluster, .PUT, stream, CloudPath.stream("news"), token: root).status == 200)
        #expect(try await call(r, cluster, .PUT, stream, CloudPath.stream("jazz"), token: alice).status == 403)
        let acl = "/v1/streams/{stream}/users/{user}/acl"
        let aliceACL = CloudPath.streamACL("songs", user: "alice")
        #expect(try await call(r, cluster, .GET, acl, aliceACL, token: alice).status == 200)
        #expect(try await call(r, cluster, .PUT, acl, aliceACL, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: alice).status == 200)
        #expect(try await call(r, cluster, .GET, acl, aliceACL, token: bob).status == 403)
        #expect(
            try await call(
                r,
                cluster,
                .PUT,
                acl,
                CloudPath.streamACL("nope", user: "alice"),
                json: #"{"publishers":[],"subscribers":[]}"#,
                token: alice
            ).status == 404
        )
        let messages = "/v1/streams/{stream}/users/{user}/messages"
        let toAlice = CloudPath.streamMessages("songs", user: "alice")

        // Realtime, with a message and a write arriving on it.
        let realtime = RealtimeResumeTests()
        try await realtime.withRealtime(cluster, token: alice) { send, next in
            record.add(["kind": "http", "method": "GET", "path": CloudPath.realtime, "status": 101, "body": NSNull()])
            func exchange(_ message: any Encodable & Sendable) async throws {
                let data = try JSONEncoder().encode(message)
                record.add(["kind": "realtime-client", "message": try JSONSerialization.jsonObject(with: data)])
                try await send(message)
            }
            func receive() async throws -> RealtimeServerMessage {
                let message = try await next()
                let data = try JSONEncoder().encode(message)
                record.add(["kind": "realtime-server", "message": try JSONSerialization.jsonObject(with: data)])
                return message
            }
            try await exchange(RealtimeClientMessage(op: .subscribe, ref: 1, topic: .stream("songs", user: "alice")))
            #expect(try await receive().op == .ack)
            func receive(until predicate: (RealtimeServerMessage) -> Bool) async throws -> [RealtimeServerMessage] {
                var seen: [RealtimeServerMessage] = []
                repeat { seen.append(try await receive()) } while !predicate(seen.last!) && seen.count < 50
                return seen
            }
            // Resuming from the start of the log: the ack, then every write so far, as entity events.
            try await exchange(RealtimeClientMessage(op: .subscribe, ref: 2, topic: .collection("notes"), since: 0))
            try await exchange(RealtimeClientMessage(op: .subscribe, ref: 5, topic: .query("notes", where: ["text": "a"]), since: 0))
            try await exchange(RealtimeClientMessage(op: .subscribe, ref: 3, topic: .stream("songs", user: "bob")))
            let replayed = try await receive { $0.ref == 3 }
            #expect(replayed.contains { $0.entity != nil }, "\(replayed)")
            #expect(replayed.contains { $0.topic == .query("notes", where: ["text": "a"]) && $0.entity?.data["text"] == "a" }, "\(replayed)")
            #expect(replayed.last?.op == .error, "alice is not among bob's subscribers")
            #expect(try await call(r, cluster, .POST, messages, toAlice, json: #"{"message":{"title":"Blackbird"}}"#, token: bob).status == 201)
            #expect(try await receive { $0.streamMessage != nil }.last?.streamMessage?.from == "bob")
            try await exchange(RealtimeClientMessage(op: .unsubscribe, ref: 4, topic: .collection("notes")))
            #expect(try await receive { $0.ref == 4 }.last?.op == .ack)
            // A batch: each request answered in turn.
            try await exchange(
                RealtimeClientBatch(requests: [
                    RealtimeClientMessage(op: .subscribe, ref: 6, topic: .object(EntityKey(collection: "notes", id: "n1"))),
                    RealtimeClientMessage(op: .unsubscribe, ref: 7, topic: .object(EntityKey(collection: "notes", id: "n1"))),
                ])
            )
            #expect(try await receive { $0.ref == 7 }.filter { $0.ref != nil }.map(\.ref) == [6, 7])
        }
        #expect(try await call(r, cluster, .POST, messages, toAlice, json: #"{"message":"hi"}"#, token: alice).status == 403)
        #expect(
            try await call(r, cluster, .POST, messages, CloudPath.streamMessages("nope", user: "alice"), json: #"{"message":1}"#, token: bob).status
                == 404
        )
        #expect(
            try await call(r, cluster, .POST, messages, toAlice, json: #"{"message":"\#(String(repeating: "x", count: 100))"}"#, token: bob).status
                == 413
        )

        // Operations.
        #expect(try await call(r, cluster, .GET, CloudPath.stats, CloudPath.stats).status == 200)
        #expect(try await call(r, cluster, .POST, "/v1/admin/faults", "/v1/admin/faults", json: #"{"failRequests":0}"#).status == 204)
        #expect(try await call(r, cluster, .DELETE, "/v1/admin/faults", "/v1/admin/faults").status == 204)
        #expect(try await call(r, cluster, .POST, CloudPath.logout, CloudPath.logout, token: alice).status == 204)
        #expect(try await call(r, cluster, .POST, CloudPath.logout, CloudPath.logout, token: alice).status == 401)

        let file = cluster.directory + "/exchanges.jsonl"
        try record.text.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try runToCompletion("/usr/bin/python3", [packageRoot + "/scripts/check-cloud-api", file])
        #expect(check.status == 0, "\(check.output)")
    }
}
