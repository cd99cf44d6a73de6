// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Testing

/// Query topics (`query:<collection>?<filter>`): a subscriber hears the writes after which an object
/// matches the filter, or before which it did — and resumes with `since` the same way.
@Suite(.serialized) struct QueryTopicTests {
    @Test func theWireFormIsCanonicalAndFiltersAreChecked() {
        let topic = Topic(#"query:tasks?{"owner":"alice","done":false}"#)
        #expect(topic == .query("tasks", where: ["done": false, "owner": "alice"]))
        #expect(topic?.description == #"query:tasks?{"done":false,"owner":"alice"}"#)
        #expect(Topic(#"query:tasks?{"done":[1]}"#) == nil, "arrays are not filter values")
        #expect(Topic(#"query:tasks?{"1x":true}"#) == nil, "not a field name")
        #expect(Topic(#"query:bad name?{}"#) == nil)
        #expect(Topic("query:tasks") == nil)
        #expect(Topic("query:tasks?{}") == .query("tasks", where: [:]), "an empty filter: the whole collection")
    }

    @Test func aQueryTopicHearsMatchesAndLeavingsAndResumesTheSame() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let topic = Topic.query("tasks", where: ["done": false])
        let baseline = ClusterBox<Int64>()
        let heard = ClusterBox<[Entity]>()
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            let ack = try await next()
            #expect(ack.op == .ack && ack.ref == 1)
            baseline.set(try #require(ack.seq))

            try await cluster.put("tasks", "t1", ["done": false], token: token)  // enters: heard
            try await cluster.put("tasks", "t2", ["done": true], token: token)  // never matches: not heard
            try await cluster.put("tasks", "t1", ["done": true], token: token)  // leaves: heard
            try await cluster.put("tasks", "t1", ["done": true, "x": 1], token: token)  // still out: not heard
            try await cluster.put("notes", "t3", ["done": false], token: token)  // another collection: not heard
            try await cluster.put("tasks", "t3", ["done": false], token: token)  // enters: heard
            try await cluster.delete("tasks", "t3")  // a match deleted: heard
            try await cluster.put("tasks", "t9", ["done": false], token: token)  // the last: heard
            var events: [Entity] = []
            for _ in 0..<5 {
                let event = try await next()
                #expect(event.op == .event && event.topic == topic)
                events.append(try #require(event.entity))
            }
            heard.set(events)
        }
        let events = try #require(heard.get())
        // In order, and nothing between them: the writes that were not heard would have come before t9.
        #expect(events.map { "\($0.id) v\($0.version)" } == ["t1 v1", "t1 v2", "t3 v1", "t3 v2", "t9 v1"])
        #expect(events[1].data == ["done": true], "the event that says t1 left")
        #expect(events[3].deleted)

        // Resuming from before them replays exactly those five, and says so.
        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: topic, since: baseline.get()))
            let ack = try await next()
            #expect(ack.op == .ack && ack.ref == 2 && ack.resync == nil)
            #expect(ack.replayed == 5)
            var replayed: [Entity] = []
            for _ in 0..<5 { replayed.append(try #require(try await next().entity)) }
            #expect(replayed == events)
        }
    }
}
