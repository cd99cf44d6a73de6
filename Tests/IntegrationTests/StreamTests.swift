// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Testing

/// Live Service streams (the Kinvey guide): created by admins, per-user ACLs enforced on send, post, listen
/// and follow, a message size limit, resume with `since`; and through the daemon, to local clients.
@Suite(.serialized) struct StreamTests {
    static let limit = 1024

    func cluster(startDaemon: Bool) async throws -> TestCluster {
        try await TestCluster.start(
            startDaemon: startDaemon,
            cloudArguments: ["--bcrypt-cost", "4", "--admin", "root", "--stream", "songs", "--stream-message-limit", String(Self.limit)],
            otherUsers: ["bob", "carol", "root"]
        )
    }

    static func decode<T: Decodable>(_ type: T.Type, _ body: String) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(body.utf8))
    }

    @Test func streamsAreMadeByAdminsAndUsedUnderEachUsersACL() async throws {
        let cluster = try await cluster(startDaemon: false)
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let bob = try await cluster.login(as: "bob")
        let root = try await cluster.login(as: "root")

        // Only admins create streams; the configured one exists from the start.
        #expect(try await cluster.call(.PUT, CloudPath.stream("news"), token: bob).status == 403)
        #expect(try await cluster.call(.PUT, CloudPath.stream("news"), token: root).status == 201)
        #expect(try await cluster.call(.PUT, CloudPath.stream("news"), token: root).status == 200)
        let list = try Self.decode(StreamList.self, try await cluster.call(.GET, CloudPath.streams, token: bob).body)
        #expect(list == StreamList(streams: ["news", "songs"], messageLimit: Self.limit))

        // A user reads and sets their own ACL; an admin anyone's; others no one's.
        let aclPath = CloudPath.streamACL("songs", user: "alice")
        #expect(try await cluster.call(.GET, aclPath, token: bob).status == 403)
        #expect(try Self.decode(StreamACL.self, try await cluster.call(.GET, aclPath, token: alice).body) == StreamACL())
        #expect(try await cluster.call(.GET, aclPath, token: root).status == 200)
        #expect(try await cluster.call(.PUT, aclPath, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: bob).status == 403)
        #expect(try await cluster.call(.PUT, aclPath, json: #"{"publishers":["b o b"],"subscribers":[]}"#, token: alice).status == 400)
        #expect(try await cluster.call(.GET, CloudPath.streamACL("nope", user: "alice"), token: alice).status == 404)

        // Sending needs the recipient's ACL to list the sender among its publishers.
        let send = CloudPath.streamMessages("songs", user: "alice")
        let refused = try await cluster.call(.POST, send, json: #"{"message":{"title":"Blackbird"}}"#, token: bob)
        #expect(refused.status == 403)
        #expect(try Self.decode(ErrorResponse.self, refused.body).error.code == .forbidden)
        #expect(try await cluster.call(.PUT, aclPath, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: alice).status == 200)
        let sent = try await cluster.call(.POST, send, json: #"{"message":{"title":"Blackbird"}}"#, token: bob)
        #expect(sent.status == 201)
        let receipt = try Self.decode(SentStreamMessage.self, sent.body)
        #expect(receipt.message.from == "bob" && receipt.message.to == "alice" && receipt.message.message == ["title": "Blackbird"])
        #expect(try await cluster.call(.POST, CloudPath.streamMessages("nope", user: "alice"), json: #"{"message":1}"#, token: bob).status == 404)
        #expect(try await cluster.call(.POST, send, json: #"{"text":"no message member"}"#, token: bob).status == 400)

        // Over the limit: 413, whether a little over (measured) or far over (refused unread).
        let big = String(repeating: "x", count: Self.limit)
        let over = try await cluster.call(.POST, send, json: #"{"message":"\#(big)"}"#, token: bob)
        #expect(over.status == 413)
        #expect(try Self.decode(ErrorResponse.self, over.body).error.code == .payloadTooLarge)
        let huge = String(repeating: "y", count: 100 * Self.limit)
        #expect(try await cluster.call(.POST, send, json: #"{"message":"\#(huge)"}"#, token: bob).status == 413)
    }

    @Test func listenersAreCheckedAndResumeWithEveryMissedMessageAndNoOversizedOne() async throws {
        let cluster = try await cluster(startDaemon: false)
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let bob = try await cluster.login(as: "bob")
        let carol = try await cluster.login(as: "carol")
        let aclPath = CloudPath.streamACL("songs", user: "alice")
        #expect(try await cluster.call(.PUT, aclPath, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: alice).status == 200)
        let topic = Topic.stream("songs", user: "alice")
        let realtime = RealtimeResumeTests()

        // Carol is not among alice's subscribers: refused, with the request's ref.
        try await realtime.withRealtime(cluster, token: carol) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 7, topic: topic))
            let answer = try await next()
            #expect(answer.op == .error && answer.ref == 7 && answer.code == .forbidden)
        }
        // Alice is: she subscribes, then goes away.
        let baseline = ClusterBox<Int64>()
        try await realtime.withRealtime(cluster, token: alice) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            let ack = try await next()
            #expect(ack.op == .ack)
            baseline.set(try #require(ack.seq))
        }
        // While she is away: 100 messages, and one too large (never delivered).
        let send = CloudPath.streamMessages("songs", user: "alice")
        for n in 1...100 {
            if n == 50 {
                let big = String(repeating: "x", count: Self.limit)
                #expect(try await cluster.call(.POST, send, json: #"{"message":"\#(big)"}"#, token: bob).status == 413)
            }
            #expect(try await cluster.call(.POST, send, json: #"{"message":{"n":\#(n)}}"#, token: bob).status == 201)
        }
        try await realtime.withRealtime(cluster, token: alice) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: topic, since: baseline.get()))
            let ack = try await next()
            #expect(ack.op == .ack && ack.resync == nil)
            var previous = try #require(baseline.get())
            for n in 1...100 {
                let event = try await next()
                let message = try #require(event.streamMessage)
                #expect(message.message == ["n": .integer(n)], "every message, in order, none extra")
                #expect(message.from == "bob" && event.topic == topic)
                #expect((event.seq ?? 0) > previous)
                previous = event.seq ?? previous
            }
        }
    }

    @Test func localClientsListenFollowSendAndPostThroughTheDaemon() async throws {
        let cluster = try await cluster(startDaemon: true)
        defer { cluster.stop() }
        let bob = try await cluster.login(as: "bob")
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "streams-1") { first in
            try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "streams-2") { second in
                // Directed: the daemon's user (alice) lets bob and herself send to her, and listens.
                let granted = try await first.grantAccess(
                    stream: "songs",
                    user: TestCluster.username,
                    acl: StreamAccess(publishers: ["bob", TestCluster.username], subscribers: [TestCluster.username])
                )
                #expect(granted.publishers == ["bob", TestCluster.username])
                #expect(try await second.access(stream: "songs", user: TestCluster.username) == granted)
                let listeners = [try await first.listen(stream: "songs"), try await second.listen(stream: "songs")]
                let queues = listeners.map { Queue($0.events) }
                let statsBefore: DaemonStats = try await first.request(Method.daemonStats, [String: Int](), as: DaemonStats.self)
                // Two tokens, one realtime subscription.
                #expect(try await cluster.stats().subscriptions["stream:songs/alice"] == 1)

                let sent = try await cluster.call(
                    .POST,
                    CloudPath.streamMessages("songs", user: TestCluster.username),
                    json: #"{"message":{"title":"Blackbird"}}"#,
                    token: bob
                )
                #expect(sent.status == 201)
                for queue in queues {
                    let message = try await Self.nextMessage(queue)
                    #expect(message.from == "bob" && message.to == TestCluster.username && message.message == ["title": "Blackbird"])
                }
                let statsAfter: DaemonStats = try await first.request(Method.daemonStats, [String: Int](), as: DaemonStats.self)
                #expect(statsAfter.streamBodiesEncoded == statsBefore.streamBodiesEncoded + 1, "encoded once for both tokens")

                // Posting is sending to oneself: alice's own listeners hear it, with the seq the post returned.
                let posted = try await second.post(stream: "songs", message: ["title": "Julia"])
                #expect(posted.from == TestCluster.username && posted.to == TestCluster.username)
                for queue in queues {
                    let message = try await Self.nextMessage(queue)
                    #expect(message.seq == posted.seq && message.message == ["title": "Julia"])
                }

                // Feed: bob lets alice follow him; a follower hears his posts, and stops hearing them when it unfollows.
                #expect(
                    try await cluster.call(
                        .PUT,
                        CloudPath.streamACL("songs", user: "bob"),
                        json: #"{"publishers":["bob"],"subscribers":["alice"]}"#,
                        token: bob
                    ).status == 200
                )
                let following = try await second.follow(stream: "songs", user: "bob")
                let feed = Queue(following.events)
                #expect(
                    try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":"new album"}"#, token: bob)
                        .status
                        == 201
                )
                let post = try await Self.nextMessage(feed)
                #expect(post.from == "bob" && post.to == "bob" && post.message == "new album")
                try await second.invalidate(token: following.token)
                try await eventually("the unfollow releases bob's topic") {
                    try await cluster.stats().subscriptions["stream:songs/bob"] == nil
                }

                // Refusals, as errors a person can act on; the connection goes on.
                let notFollower = await #expect(throws: LiveGateError.self) { _ = try await first.follow(stream: "songs", user: "carol") }
                #expect(notFollower?.code == .notPermitted, "\(String(describing: notFollower))")
                let notPublisher = await #expect(throws: LiveGateError.self) {
                    try await first.send(stream: "songs", to: "carol", message: "hi")
                }
                #expect(notPublisher?.code == .notPermitted)
                let noStream = await #expect(throws: LiveGateError.self) { _ = try await first.listen(stream: "nope") }
                #expect(noStream?.code == .notFound)
                let tooLarge = await #expect(throws: LiveGateError.self) {
                    try await first.post(stream: "songs", message: .string(String(repeating: "x", count: Self.limit)))
                }
                #expect(tooLarge?.code == .limitExceeded, "\(String(describing: tooLarge))")
                let badName = await #expect(throws: LiveGateError.self) { _ = try await first.listen(stream: "no such/stream") }
                #expect(badName?.code == .invalidParams)

                // Nothing of the refused or oversized messages reached the listeners: the next is the next sent.
                let after = try await second.post(stream: "songs", message: "still here")
                for queue in queues { #expect(try await Self.nextMessage(queue).seq == after.seq) }
            }
        }
    }

    @Test func revokingASubscriberEndsItsSubscriptionAndWhatWasSentMeanwhileIsNeverReplayedToIt() async throws {
        let cluster = try await cluster(startDaemon: false)
        defer { cluster.stop() }
        try await StreamRevocationScenario.run(on: cluster)
    }

    @Test func aSubscriptionBeingMadeWhenItsACLIsRevokedIsEndedNotAcked() async throws {
        let cluster = try await cluster(startDaemon: false)
        defer { cluster.stop() }
        let alice = try await cluster.login()
        let bob = try await cluster.login(as: "bob")
        let bobsACL = CloudPath.streamACL("songs", user: "bob")
        let topic = Topic.stream("songs", user: "bob")
        #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: bob).status == 200)
        // The subscription's answer is held back after it read the ACL: the revocation lands in between (or,
        // sent before the read, is in what it reads).
        try await cluster.fault(#"{"delayStreamAdmissionMs":1000}"#)
        try await withRealtimeConnection(to: cluster.cloudURL, token: alice) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: topic))
            #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":[]}"#, token: bob).status == 200)
            let answer = try await next()
            #expect(answer.op == .error && answer.ref == 1 && answer.code == .forbidden, "refused or ended, never acked: \(answer)")
            // Nothing sent to bob reaches alice: the next message is the answer to her next request.
            #expect(
                try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":"private"}"#, token: bob).status
                    == 201
            )
            try await send(RealtimeClientMessage(op: .subscribe, ref: 2, topic: .object(EntityKey(collection: "notes", id: "n1"))))
            let next = try await next()
            #expect(next.op == .ack && next.ref == 2, "\(next)")
        }
    }

    @Test func revokingASubscriberEndsItsSubscriptionThroughTheDaemon() async throws {
        let cluster = try await cluster(startDaemon: true)
        defer { cluster.stop() }
        let bob = try await cluster.login(as: "bob")
        let bobsACL = CloudPath.streamACL("songs", user: "bob")
        #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["alice","carol"]}"#, token: bob).status == 200)
        // Following while the daemon is still connecting would subscribe only once it is connected (with a
        // resync notice): wait for the connection, so that a follow returns subscribed.
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "revoked") { connection in
            let following = try await connection.follow(stream: "songs", user: "bob")
            let events = Queue(following.events)
            #expect(try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":1}"#, token: bob).status == 201)
            #expect(try await Self.nextMessage(events).message == 1)

            // Carol is still welcome; alice (the daemon's user) is not any more: her subscription ends now.
            #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["carol"]}"#, token: bob).status == 200)
            let ended = try await withTimeout(.seconds(20), "the follower is told its subscription ended") {
                try await events.next()
            }
            guard case .error(let error) = ended else {
                Issue.record("expected the end of the subscription, got \(String(describing: ended))")
                return
            }
            #expect(error.code == .notPermitted, "\(error)")
            try await eventually("the cloud holds no subscription of alice to bob's topic") {
                try await cluster.stats().subscriptions["stream:songs/bob"] == nil
            }
            // What bob posts now does not reach alice: the next thing her token sees is nothing until she is
            // let back in and follows again.
            #expect(try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":2}"#, token: bob).status == 201)
            #expect(try await cluster.call(.PUT, bobsACL, json: #"{"publishers":["bob"],"subscribers":["alice"]}"#, token: bob).status == 200)
            let again = Queue(try await connection.follow(stream: "songs", user: "bob").events)
            #expect(try await cluster.call(.POST, CloudPath.streamMessages("songs", user: "bob"), json: #"{"message":3}"#, token: bob).status == 201)
            #expect(try await Self.nextMessage(again).message == 3)
        }
    }

    static func nextMessage(_ queue: Queue<StreamEvent>) async throws -> StreamMessageBody {
        try await withTimeout(.seconds(20), "waiting for a stream message") {
            while let event = try await queue.next() {
                if case .message(let message) = event { return message }
                Issue.record("unexpected stream event \(event)")
            }
            throw ClusterError("the stream token ended")
        }
    }
}
