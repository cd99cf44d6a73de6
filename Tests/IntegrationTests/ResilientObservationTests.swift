// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveChangeSet
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Testing

private struct Item: Codable, Sendable, Equatable {
    var v: Int?
    var room: String?
    var at: Int?
}

/// `LiveGateClient` across a daemon restart: one connection, and every live token of it (an object, a paged
/// collection window, a stream listener, a feed) observed again on the new connection by itself.
@Suite(.serialized) struct LiveGateClientRestartTests {
    @Test func everyTokenOfAClientIsObservedAgainAfterADaemonRestart() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--stream", "songs"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let token = try await cluster.login()
        try await cluster.put("notes", "d1", ["v": 1], token: token)
        for (id, at) in [("a", 10), ("b", 30)] {
            try await cluster.put("chat", id, ["room": "r", "at": .integer(at)], token: token)
        }
        let daemon = try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "resilient")
        defer { daemon.close() }

        let note = Received<LiveSnapshot<Item>>()
        let noteToken = try await daemon.object(collection: "notes", id: "d1", as: Item.self).observe { note.add($0) }
        let window = Received<LiveCollectionSnapshot<Item>>()
        let chat = try await daemon.collection("chat", where: ["room": "r"], sort: SortParams(field: "at"), pageSize: 1, as: Item.self)
            .observe { window.add($0) }
        let songs = daemon.stream("songs", of: Item.self)
        try await songs.grantAccess(to: TestCluster.username, StreamAccess(publishers: [TestCluster.username], subscribers: [TestCluster.username]))
        let heard = Received<LiveStreamEvent<Item>>()
        let listening = try await songs.listen { heard.add($0) }
        let feedEvents = Received<LiveFeedEvent<Item>>()
        let feed = try await daemon.feed(collection: "notes", of: Item.self).subscribe { feedEvents.add($0) }

        try await note.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh && $0.last?.version == 1 }
        try await window.wait(for: "the first page") { $0.last?.loadingStatus == .loaded && $0.last?.objects.count == 1 }
        #expect(try await chat.nextPage())
        try await window.wait(for: "two pages") { $0.last?.objects.map(\.id) == ["a", "b"] }
        try await songs.send(Item(v: 1), to: TestCluster.username)
        try await heard.wait(for: "the first song") { $0.count == 1 }
        try await cluster.put("notes", "d1", ["v": 2], token: token)
        try await note.wait(for: "v2") { $0.last?.version == 2 && $0.last?.loadingStatus == .loaded }
        let daemonTokens = [noteToken.token, chat.notificationToken.token, listening.token, feed.token]

        #expect(cluster.stopDaemon() == 0)
        try await note.wait(for: "the loss of the daemon (object)") { $0.last?.loadingStatus == .loading }
        try await window.wait(for: "the loss of the daemon (window)") { $0.last?.loadingStatus == .loading }
        let windowBefore = window.all.count
        #expect(window.all.last?.objects.map(\.id) == ["a", "b"], "the window it had, loading")
        try await cluster.put("notes", "d1", ["v": 3], token: token)
        try await cluster.put("chat", "c", ["room": "r", "at": 20], token: token)
        _ = try await cluster.startDaemon()

        try await note.wait(for: "v3 after the restart") { $0.last?.version == 3 && $0.last?.loadingStatus == .loaded }
        try await window.wait(for: "both pages again, with c") {
            $0.last?.objects.map(\.id) == ["a", "c"] && $0.last?.loadingStatus == .loaded
        }
        try await heard.wait(for: "a resync notice") { $0.contains { if case .resync = $0 { true } else { false } } }
        try await feedEvents.wait(for: "a resync notice, then ready again") { events in
            guard let resync = events.firstIndex(where: { if case .resync = $0 { true } else { false } }) else { return false }
            return events[resync...].contains { if case .ready = $0 { true } else { false } }
        }

        // Each version confirmed once, none lost or repeated, none going back.
        let versions = note.all.compactMap(\.version)
        #expect(versions == versions.sorted(), "versions went back: \(versions)")
        let loaded = note.all.filter { $0.loadingStatus == .loaded }.compactMap(\.version)
        #expect(loaded == [1, 2, 3], "\(note.all.map { "\($0.version ?? 0)/\($0.loadingStatus)" })")
        // The window's first update after the restart replaces what it held; every later one applies to it.
        // It comes back whole: both its pages at once, never one page, then the other (the observation asks for
        // its pages in its collection.observe, and passes on no empty placeholder while the fetch runs).
        let after = Array(window.all[windowBefore...])
        #expect(after.first?.reset == true)
        #expect(after.allSatisfy { $0.objects.count == 2 }, "\(after.map { "\($0.objects.map(\.id))/\($0.loadingStatus)" })")
        var held: [String] = []
        for update in after {
            // A consumer applying each change set (insertions and modifications taking the new items) ends
            // with the window the update carries.
            held = update.changes.apply(to: update.reset ? [] : held) { update.objects[$0].id }
            #expect(held == update.objects.map(\.id), "\(update.changes)")
        }
        #expect(held == ["a", "c"])

        // Live again on the new connection: the same four observations, new daemon tokens, one connection.
        try await songs.send(Item(v: 2), to: TestCluster.username)
        try await heard.wait(for: "a song after the restart") { events in
            events.contains { if case .message(let item?, _, _) = $0 { item.v == 2 } else { false } }
        }
        try await cluster.put("notes", "d1", ["v": 4], token: token)
        try await note.wait(for: "v4, live") { $0.last?.version == 4 }
        try await feedEvents.wait(for: "v4 in the feed") { events in
            events.contains { if case .next(let item?, _, _, _, _) = $0 { item.v == 4 } else { false } }
        }
        try await cluster.put("chat", "b0", ["room": "r", "at": 15], token: token)
        try await window.wait(for: "b0 in the window, at its place") { $0.last?.objects.map(\.id).prefix(2) == ["a", "b0"] }
        let stats = try await daemon.connection().request(Method.daemonStats, [String: Int](), as: DaemonStats.self)
        #expect(stats.connections == 1 && stats.tokens == 4, "\(stats)")
        _ = daemonTokens

        // Released tokens end in the daemon (the tokens of the new connection).
        noteToken.invalidate()
        chat.invalidate()
        listening.invalidate()
        feed.invalidate()
        try await eventually("the tokens to end in the daemon") {
            try await daemon.connection().request(Method.daemonStats, [String: Int](), as: DaemonStats.self).tokens == 0
        }
    }

    /// An object is observed again from the version it holds (`sinceVersion`): unchanged across a restart it is
    /// loaded again at that version; changed twice while a daemon without its cache was away, the skip comes
    /// after a resync notice, never silently.
    @Test func anObjectIsObservedAgainFromTheVersionItHolds() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let token = try await cluster.login()
        try await cluster.put("notes", "u1", ["v": 1], token: token)
        let daemon = try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "resuming")
        defer { daemon.close() }
        let note = Received<LiveSnapshot<Item>>()
        let observation = try await daemon.object(collection: "notes", id: "u1", as: Item.self).observe { note.add($0) }
        defer { observation.invalidate() }
        try await note.wait(for: "fresh v1") { $0.last?.dataStatus == .fresh && $0.last?.loadingStatus == .loaded }

        #expect(cluster.stopDaemon() == 0)
        try await note.wait(for: "loading") { $0.last?.loadingStatus == .loading }
        _ = try await cluster.startDaemon()
        try await note.wait(for: "loaded again") { $0.last?.loadingStatus == .loaded }
        #expect(
            note.all.map { "\($0.version ?? 0)/\($0.dataStatus)/\($0.loadingStatus)" }
                == ["0/notExist/loading", "1/fresh/loaded", "1/fresh/loading", "1/fresh/loaded"]
        )

        #expect(cluster.stopDaemon() == 0)
        try FileManager.default.removeItem(atPath: cluster.directory + "/state")  // nothing to resume from: a fetch
        try await cluster.put("notes", "u1", ["v": 2], token: token)
        try await cluster.put("notes", "u1", ["v": 3], token: token)
        _ = try await cluster.startDaemon()
        try await note.wait(for: "v3") { $0.last?.version == 3 && $0.last?.loadingStatus == .loaded }
        let after = note.all.suffix(from: 4).filter { $0.loadingStatus != .loading || $0.resync }
        #expect(after.map { "\($0.version ?? 0)\($0.resync ? " resync" : "")" } == ["0 resync", "3"], "\(after.map { ($0.version, $0.resync) })")
    }

    @Test func aClientSaysWhyItCannotReachTheDaemon() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("livegate-nobody-\(UUID().uuidString).sock").path
        do {
            _ = try await LiveGateClient.connect(socketPath: path, client: "nobody", timeout: .milliseconds(500))
            Issue.record("connected to a socket nobody listens on")
        } catch let error as LiveGateError {
            #expect(error.message.contains(path) && error.message.contains("not reachable"), "\(error)")
        }
    }

    @Test func aRequestWhileTheDaemonIsAwayWaitsForItThenFails() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        let daemon = LiveGateClient(socketPath: cluster.socketPath, client: "waiting", requestWait: .milliseconds(500))
        defer { daemon.close() }
        _ = try await daemon.connection()
        #expect(cluster.stopDaemon() == 0)
        try await eventually("the client to see the daemon gone") { !daemon.isConnected }
        do {
            try await daemon.object(collection: "notes", id: "w", as: Item.self).write(Item(v: 1))
            Issue.record("a write with the daemon away succeeded")
        } catch let error as LiveGateError {
            #expect(error.message.contains("not reachable"), "\(error)")
        }
        // Back: the same client serves again, without being made again.
        _ = try await cluster.startDaemon()
        try await eventually("the client to reconnect") { daemon.isConnected }
        #expect(try await daemon.object(collection: "notes", id: "w", as: Item.self).write(Item(v: 1)) == 1)
    }
}

@Suite struct ResumeFilterTests {
    static func change(_ version: Int64?, _ data: DataStatus, _ loading: LoadingStatus) -> ObjectChangedParams {
        ObjectChangedParams(
            token: 1,
            snapshot: version.map { ObjectSnapshot(collection: "c", id: "i", version: $0, data: [:], updatedAt: "t") },
            dataStatus: data,
            loadingStatus: loading
        )
    }

    @Test func aReobservationPassesOnOnlyWhatIsNew() {
        var filter = ResumeFilter()
        func admit(_ change: ObjectChangedParams) -> Bool { filter.admit(change) }
        #expect(admit(Self.change(2, .fresh, .loaded)))
        let notice = filter.disconnected()
        #expect(notice?.loadingStatus == .loading && notice?.snapshot?.version == 2)
        // After reconnecting: the daemon's cached copy of the same version is not news; its confirmation is.
        #expect(!admit(Self.change(2, .local, .loading)))
        #expect(!admit(Self.change(nil, .notExist, .loading)), "nothing cached is not a deletion")
        #expect(admit(Self.change(2, .fresh, .loaded)))
        #expect(!admit(Self.change(2, .fresh, .loaded)), "once")
        #expect(!admit(Self.change(1, .fresh, .loaded)), "never older")
        #expect(admit(Self.change(3, .fresh, .loaded)))
        #expect(admit(Self.change(nil, .notExist, .loaded)), "a confirmed deletion is news")
    }

    /// A re-observation from the version it holds (`sinceVersion`) told `unchanged`: the snapshot it holds, loaded
    /// again, once; the version to re-observe from is never a pending write's.
    @Test func anUnchangedNoticeGivesBackTheSnapshotItHolds() {
        var filter = ResumeFilter()
        #expect(filter.pass(Self.change(4, .fresh, .loaded)) != nil)
        #expect(filter.resumeVersion == 4)
        _ = filter.disconnected()
        var unchanged = Self.change(nil, .fresh, .loaded)
        unchanged.unchanged = true
        let back = filter.pass(unchanged)
        #expect(back?.snapshot?.version == 4 && back?.loadingStatus == .loaded && back?.dataStatus == .fresh)
        #expect(filter.pass(unchanged) == nil, "once")
        var pending = Self.change(4, .fresh, .loaded)
        pending.pendingWrites = true
        #expect(filter.pass(pending) != nil)
        #expect(filter.resumeVersion == nil, "how the write ends must be told, whatever its version")
        #expect(ResumeFilter().resumeVersion == nil)
    }

    @Test func anObjectThatDoesNotExistIsSaidToBeLoaded() {
        var filter = ResumeFilter()
        func admit(_ change: ObjectChangedParams) -> Bool { filter.admit(change) }
        #expect(admit(Self.change(nil, .notExist, .loading)))
        #expect(admit(Self.change(nil, .notExist, .loaded)), "the end of its loading")
        #expect(!admit(Self.change(nil, .notExist, .loaded)), "once")
        _ = filter.disconnected()
        #expect(!admit(Self.change(nil, .notExist, .loading)))
        #expect(admit(Self.change(nil, .notExist, .loaded)), "confirmed again after a reconnection")
    }
}
