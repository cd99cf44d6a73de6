// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import Testing

/// A stream subscriber shut out and let back in, through the cloud's realtime API: what was sent to the
/// stream while it was out never reaches it, live or replayed. `StreamTests` runs it as it is, and
/// `EventPublicationLagTests` with the PostgreSQL event pump held back while the message is sent.
enum StreamRevocationScenario {
    /// On `cluster` (a cloud with the stream `songs` and the users `alice`, the cluster's, and `bob`): alice
    /// subscribes to bob's `songs`; bob takes her off its subscribers (her subscription ends with `forbidden`);
    /// `whileShutOut` runs, bob sends a message, and lets her back in; she resumes from before. The ack says
    /// `resync` (continuity is broken: the message she may not hear is not replayed) and the next message
    /// sent is the next she hears.
    static func run(on cluster: TestCluster, whileShutOut: () async throws -> Void = {}) async throws {
        let alice = try await cluster.login()
        let bob = try await cluster.login(as: "bob")
        let bobsACL = CloudPath.streamACL("songs", user: "bob")
        let toBob = CloudPath.streamMessages("songs", user: "bob")
        let topic = Topic.stream("songs", user: "bob")
        #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: bob).status == 200)
        let baseline = ClusterBox<Int64>()
        try await withRealtimeConnection(to: cluster.cloudURL, token: alice) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            baseline.set(try #require(try await next().seq))
            #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":[]}"#, token: bob).status == 200)
            let ended = try await next()
            #expect(ended.op == .error && ended.ref == nil && ended.topic == topic && ended.code == .forbidden, "\(ended)")
        }
        try await whileShutOut()
        // Sent while alice was out; then she is let back in and resumes from before: not replayed.
        #expect(try await cluster.call(.POST, toBob, json: #"{"message":"private"}"#, token: bob).status == 201)
        #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: bob).status == 200)
        try await withRealtimeConnection(to: cluster.cloudURL, token: alice) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: topic, since: baseline.get()))
            let ack = try await next()
            #expect(ack.op == .ack && ack.resync == true && ack.replayed == nil, "continuity broken by the ACL: \(ack)")
            #expect(try await cluster.call(.POST, toBob, json: #"{"message":"public"}"#, token: bob).status == 201)
            #expect(try await next().streamMessage?.message == "public", "the next message is the one sent after")
        }
    }
}
