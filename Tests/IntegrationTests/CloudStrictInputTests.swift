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
}
