// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveChangeSet
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import NIOHTTP1
import Synchronization
import Testing

private struct Note: Codable, Sendable, Equatable {
    var text: String
    var likes: Int?
}

/// What a handler received, for a test to wait on.
final class Received<Element: Sendable>: Sendable {
    private struct State {
        var elements: [Element] = []
        var waiters: [Int: AsyncStream<Void>.Continuation] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    func add(_ element: Element) {
        let waiters = state.withLock { state in
            state.elements.append(element)
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.yield() }
    }

    var all: [Element] { state.withLock { $0.elements } }

    /// Waits until `condition` holds over what was received (woken by each new element).
    func wait(for what: String, _ condition: @escaping @Sendable ([Element]) -> Bool) async throws {
        let (wakeups, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = sink
            return state.nextWaiter
        }
        defer { _ = state.withLock { $0.waiters.removeValue(forKey: id) } }
        try await withTimeout(.seconds(20), "waiting for \(what)") {
            var iterator = wakeups.makeAsyncIterator()
            while !condition(self.all) {
                guard await iterator.next() != nil else { throw CancellationError() }
            }
        }
    }
}

/// The typed Swift API (`LiveObject<Model>`, `LiveCollection<Model>`, `NotificationToken`) against the real
/// daemon and cloud.
@Suite(.serialized) struct TypedClientTests {
    @Test func aTypedObjectIsObservedWrittenAndReleasedWithItsToken() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "t1", ["text": "hello"])
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "typed") { daemon in
            let note = daemon.object(collection: "notes", id: "t1", as: Note.self)
            let received = Received<LiveSnapshot<Note>>()
            var token: NotificationToken? = try await note.observe { received.add($0) }
            try await received.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh }
            #expect(received.all.last?.model == Note(text: "hello"))

            let version = try await note.write(Note(text: "typed", likes: 3))
            #expect(version == 2)
            try await received.wait(for: "v2 confirmed") { $0.last?.version == 2 && $0.last?.pendingWrites == false }
            #expect(received.all.contains { $0.pendingWrites && $0.model == Note(text: "typed", likes: 3) }, "shown pending first")
            #expect(received.all.last?.model == Note(text: "typed", likes: 3))

            // On the main actor.
            let onMain = Received<Bool>()
            let mainToken = try await note.observeOnMainActor { _ in
                MainActor.preconditionIsolated("delivered on the main actor")
                onMain.add(true)
            }
            try await onMain.wait(for: "a main-actor delivery") { !$0.isEmpty }
            mainToken.invalidate()

            // Exactly once.
            let once = Received<LiveSnapshot<Note>>()
            let onceToken = try await note.observeOnce { once.add($0) }
            try await once.wait(for: "the one delivery") { !$0.isEmpty }
            try await cluster.put("notes", "t1", ["text": "later"])
            try await received.wait(for: "v3") { $0.last?.version == 3 }
            #expect(once.all.count == 1)
            _ = onceToken

            // Releasing the token ends the observation in the daemon too.
            let before = try await daemon.request(Method.daemonStats, [String: Int](), as: DaemonStats.self).tokens
            token = nil
            try await eventually("the released token to end in the daemon") {
                try await daemon.request(Method.daemonStats, [String: Int](), as: DaemonStats.self).tokens == before - 1
            }
            #expect(token == nil)

            // Data that is not a Note: the snapshot says so instead of failing.
            try await cluster.put("notes", "odd", ["text": 42])
            let odd = Received<LiveSnapshot<Note>>()
            let oddToken = try await daemon.object(collection: "notes", id: "odd", as: Note.self).observe { odd.add($0) }
            try await odd.wait(for: "the fresh state") { $0.last?.dataStatus == .fresh }
            #expect(odd.all.last?.model == nil && odd.all.last?.error?.message.contains("does not decode as Note") == true)
            oddToken.invalidate()
        }
    }

    @Test func aTypedCollectionPagesAndCarriesChangeSets() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        for (id, rank) in [("a", 10), ("b", 20), ("c", 30)] {
            try await cluster.put("tasks", id, ["text": .string(id), "likes": .integer(rank)], token: token)
        }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "typed") { daemon in
            let tasks = daemon.collection("tasks", sort: SortParams(field: "likes"), pageSize: 2, as: Note.self)
            let received = Received<LiveCollectionSnapshot<Note>>()
            let observation = try await tasks.observe { received.add($0) }
            try await received.wait(for: "the first page") { $0.last?.loadingStatus == .loaded && $0.last?.models.count == 2 }
            #expect(received.all.last?.hasNext == true && received.all.last?.count == 3)
            #expect(try await observation.nextPage())
            try await received.wait(for: "two pages") { $0.last?.models.count == 3 }
            #expect(received.all.last?.models.map(\.text) == ["a", "b", "c"])
            #expect(try await observation.objects(offset: 1, limit: 2).map(\.id) == ["b", "c"])

            try await cluster.put("tasks", "ab", ["text": "ab", "likes": 15], token: token)
            try await received.wait(for: "the insertion") { $0.last?.models.count == 4 }
            let last = try #require(received.all.last)
            #expect(last.models.map(\.text) == ["a", "ab", "b", "c"])
            #expect(last.changes.insertions == [1], "inserted at its sorted place")
            observation.invalidate()

            // The same window as an AsyncSequence, paged through its observation; cancelling the iterating
            // task ends the observation.
            let (paged, snapshots) = try await tasks.snapshots()
            let counts = try await withTimeout(.seconds(20), "the window as a sequence, paged") { () -> [Int] in
                var counts: [Int] = []
                for try await snapshot in snapshots where snapshot.loadingStatus == .loaded {
                    counts.append(snapshot.models.count)
                    if counts == [2] { #expect(try await paged.nextPage()) }
                    if snapshot.models.count == 4 { break }
                }
                return counts
            }
            #expect(counts.first == 2 && counts.last == 4, "\(counts)")
            let iterating = Task { for try await _ in snapshots {} }
            #expect(!paged.notificationToken.isInvalidated)
            iterating.cancel()
            try await eventually("the cancelled iteration to end its token") { paged.notificationToken.isInvalidated }
        }
    }

    @Test func typedStreamsAndFeedsDecodeTheirMessagesAndEndWithTheirTokens() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--stream", "songs"], otherUsers: ["bob"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let bob = try await cluster.login(as: "bob")
        struct Song: Codable, Sendable, Equatable { var title: String }
        try await LiveGateConnection.withConnection(socketPath: cluster.socketPath, client: "typed-streams") { daemon in
            // A stream of songs: alice lets bob and herself send to her, and listens.
            let songs = daemon.stream("songs", of: Song.self)
            try await songs.grantAccess(
                to: TestCluster.username,
                StreamAccess(publishers: ["bob", TestCluster.username], subscribers: [TestCluster.username])
            )
            #expect(try await songs.access(of: TestCluster.username).subscribers == [TestCluster.username])
            let heard = Received<LiveStreamEvent<Song>>()
            let listening = try await songs.listen { heard.add($0) }
            #expect(
                try await cluster.call(
                    .POST,
                    CloudPath.streamMessages("songs", user: TestCluster.username),
                    json: #"{"message":{"title":"Blackbird"}}"#,
                    token: bob
                ).status == 201
            )
            try await songs.send(Song(title: "Julia"), to: TestCluster.username)
            // Not a song: heard, with the reason it does not decode.
            try await daemon.send(stream: "songs", to: TestCluster.username, message: ["tempo": 120])
            try await heard.wait(for: "three messages") { $0.count == 3 }
            let events = heard.all
            guard case .message(let first?, let body, nil) = events[0], case .message(let second?, _, nil) = events[1],
                case .message(nil, _, let failure?) = events[2]
            else {
                Issue.record("unexpected events \(events)")
                return
            }
            #expect(first == Song(title: "Blackbird") && body.from == "bob")
            #expect(second == Song(title: "Julia"))
            #expect(failure.code == nil && failure.message.contains("Song"))
            listening.invalidate()
            try await eventually("the listening ends with its token") { try await cluster.stats().subscriptions["stream:songs/alice"] == nil }

            // A feed of notes: ready, then each change decoded, a deletion as such.
            let changes = Received<LiveFeedEvent<Note>>()
            let feed = try await daemon.feed(collection: "notes", of: Note.self).subscribe { changes.add($0) }
            try await changes.wait(for: "ready") { $0.contains { if case .ready = $0 { true } else { false } } }
            try await cluster.put("notes", "f1", ["text": "hello"])
            try await cluster.delete("notes", "f1")
            try await changes.wait(for: "two changes") { events in events.filter { if case .next = $0 { true } else { false } }.count == 2 }
            let nexts = changes.all.compactMap { event -> (Note?, Bool)? in
                if case .next(let note, _, let deleted, _, _) = event { (note, deleted) } else { nil }
            }
            #expect(nexts.map(\.0) == [Note(text: "hello"), nil] && nexts.map(\.1) == [false, true])
            feed.invalidate()
            try await eventually("the feed ends with its token") { try await cluster.stats().subscriptions["collection:notes"] == nil }
        }
    }
}
