// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import NIOHTTP1
import Testing

/// A write's body is read strictly: a condition that cannot be kept (`ifVersion` null, below 0, not whole) or a
/// member the API does not take (a misspelt `ifversion`) is 400 naming it, never a write made without its
/// condition.
@Suite(.serialized) struct CloudStrictInputTests {
    @Test func aWriteBodyWithAConditionItCannotKeepIsRefused() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--bcrypt-cost", "4"])
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let object = CloudPath.object(EntityKey(collection: "notes", id: "s1"))
        let refusals: [(body: String, names: String)] = [
            (#"{"data":{"a":1},"ifVersion":null}"#, "ifVersion"),
            (#"{"data":{"a":1},"ifVersion":-1}"#, "ifVersion"),
            (#"{"data":{"a":1},"ifVersion":1.5}"#, "ifVersion"),
            (#"{"data":{"a":1},"ifVersion":"1"}"#, "ifVersion"),
            (#"{"data":{"a":1},"ifversion":3}"#, "ifversion"),
            (#"{"dat":{"a":1}}"#, "dat"),
            (#"[{"data":{"a":1}}]"#, "JSON object"),
        ]
        for method in [HTTPMethod.PUT, .PATCH] {
            for (body, names) in refusals {
                let answer = try await cluster.call(method, object, json: body, token: alice)
                #expect(answer.status == 400 && answer.body.contains(names) && answer.body.contains(#""code":"bad_request""#), "\(body): \(answer)")
            }
        }
        #expect(try await cluster.stats().objectWrites == 0, "nothing was written")
        // Well-formed: the condition kept.
        #expect(try await cluster.call(.PUT, object, json: #"{"data":{"a":1},"ifVersion":0}"#, token: alice).status == 201)
        #expect(try await cluster.call(.PUT, object, json: #"{"data":{"a":2},"ifVersion":0}"#, token: alice).status == 409)
        #expect(try await cluster.call(.PATCH, object, json: #"{"data":{"b":3},"ifVersion":1}"#, token: alice).status == 200)
    }

    /// A body is JSON as its request says, UTF-8 and nothing else: a missing or other `Content-Type` is 415; a
    /// byte order mark, UTF-16 and a member a body's schema does not list are 400, naming what is wrong;
    /// `%FF` in the query is 400, never a U+FFFD filter. `ifVersion` 1.0 is the whole number 1 (JSON Schema's
    /// integer).
    @Test func aBodyIsUTF8JSONSaidToBeSoWithTheMembersItsSchemaLists() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--bcrypt-cost", "4"])
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let object = CloudPath.object(EntityKey(collection: "notes", id: "s2"))
        let body = #"{"data":{"a":1}}"#
        for type in [nil, "text/plain", "application/x-www-form-urlencoded", "application/xml", "application/json; charset=utf-16"] {
            let answer = try await cluster.call(.PUT, object, bytes: Array(body.utf8), contentType: type, token: alice)
            #expect(answer.status == 415 && answer.body.contains(#""code":"unsupported_media_type""#), "\(type ?? "none"): \(answer)")
        }
        let login = try await cluster.call(
            .POST,
            CloudPath.login,
            json: #"{"username":"alice","password":"x"}"#,
            headers: [("Content-Type", "text/plain")]
        )
        #expect(login.status == 415, "a login too: \(login)")
        let json = [("Content-Type", "application/json; charset=UTF-8")]
        #expect(try await cluster.call(.PUT, object, json: body, token: alice, headers: json).status == 201, "charset=UTF-8 is taken")

        let bom = try await cluster.call(.PUT, object, bytes: [0xEF, 0xBB, 0xBF] + Array(body.utf8), token: alice)
        #expect(bom.status == 400 && bom.body.contains("byte order mark"), "\(bom)")
        var utf16: [UInt8] = [0xFF, 0xFE]
        for unit in body.utf16 { utf16 += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        let sixteen = try await cluster.call(.PUT, object, bytes: utf16, token: alice)
        #expect(sixteen.status == 400 && sixteen.body.contains("not UTF-8"), "\(sixteen)")
        let noMark = try await cluster.call(.PUT, object, bytes: Array(utf16.dropFirst(2)), token: alice)
        #expect(noMark.status == 400 && noMark.body.contains("not UTF-8"), "UTF-16 without a mark: \(noMark)")

        let unknown: [(path: String, method: HTTPMethod, json: String, name: String)] = [
            ("/v1/objects/read", .POST, #"{"keys":[{"collection":"notes","id":"s2","extra":1}]}"#, "keys[0].extra"),
            ("/v1/objects/read", .POST, #"{"keys":[{"collection":"notes","id":"s2"}],"limit":5}"#, "limit"),
            ("/v1/auth/refresh", .POST, #"{"refreshToken":"x","user":"alice"}"#, "user"),
        ]
        for (path, method, json, name) in unknown {
            let answer = try await cluster.call(method, path, json: json, token: alice)
            #expect(answer.status == 400 && answer.body.contains("unknown member \\\"\(name)\\\""), "\(json): \(answer)")
        }

        let percent = try await cluster.call(.GET, "/v1/collections/notes/objects?where=%7B%22t%22%3A%22%FF%22%7D", token: alice)
        #expect(percent.status == 400 && percent.body.contains("not UTF-8"), "\(percent)")
        let fine = try await cluster.call(.GET, "/v1/collections/notes/objects?where=%7B%22a%22%3A1%7D", token: alice)
        #expect(fine.status == 200 && fine.body.contains(#""id":"s2""#), "\(fine)")

        // U+0000, which PostgreSQL cannot store (it answered 503 there), is refused on every store alike.
        for json in [#"{"data":{"a":"x\u0000y"}}"#, #"{"data":{"b":[{"x\u0000":1}]}}"#] {
            let answer = try await cluster.call(.PUT, object, json: json, token: alice)
            #expect(answer.status == 400 && answer.body.contains("U+0000"), "\(json): \(answer)")
        }
        // A + is a plus sign (RFC 3986): a form encoder's + for a space is refused with a hint, not read as a space.
        let plus = try await cluster.call(.GET, "/v1/collections/notes/objects?where=%7B%22a%22%3A+1%7D", token: alice)
        #expect(plus.status == 400 && plus.body.contains("plus sign"), "\(plus)")
        let whole = try await cluster.call(.PUT, object, json: #"{"data":{"a":2},"ifVersion":1.0}"#, token: alice)
        #expect(whole.status == 200 && whole.body.contains(#""version":2"#), "ifVersion 1.0: \(whole)")
        let deleted = try await cluster.call(.DELETE, object + "?ifVersion=2.0", token: alice)
        #expect(deleted.status == 200, "a query's ifVersion 2.0 is 2, as a body's: \(deleted)")
    }

    /// An injected delay is bounded (an hour), and never holds a stop back: the cloud stops on SIGTERM within
    /// seconds while a request waits out an hour's delay.
    @Test func anInjectedDelayIsBoundedAndNeverHoldsAStopBack() async throws {
        let cluster = try await TestCluster.start(startDaemon: false, cloudArguments: ["--bcrypt-cost", "4"])
        defer { cluster.stop() }
        let tooLong = try await cluster.call(.POST, "/v1/admin/faults", json: #"{"delayRequestsMs":9223372036854775807}"#)
        #expect(tooLong.status == 400 && tooLong.body.contains("delayRequestsMs"), "\(tooLong)")
        try await cluster.fault(#"{"delayRequestsMs":3600000,"delayRealtimeRequestsMs":3600000}"#)
        let waiting = Task { try? await cluster.call(.GET, "/v1/collections/notes/objects/x") }
        try await eventually("the request held by the delay", timeout: .seconds(10)) { cluster.cloudLog.contains("held by an injected delay") }
        let started = ContinuousClock.now
        #expect(cluster.stopCloudCleanly(deadline: .seconds(10)) == nil)
        #expect(ContinuousClock.now - started < .seconds(5), "stopped in \(ContinuousClock.now - started)")
        _ = await waiting.value
    }
}
