// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import LiveJSON
import Observation
import Testing

private struct Note: Codable, Sendable, Equatable {
    var text: String
}

/// Which properties of an `@Observable` model told their observers of a change (`withObservationTracking`, armed
/// again after each change), for a test to compare with what the daemon's notifications said.
@MainActor
final class PropertyChanges {
    private(set) var fired = Set<String>()

    func track(_ name: String, _ read: @escaping @MainActor @Sendable () -> Void) {
        withObservationTracking {
            read()
        } onChange: { [weak self] in
            // Called as the property is about to change, on the main actor (the models change there).
            Task { @MainActor in
                self?.fired.insert(name)
                self?.track(name, read)
            }
        }
    }

    func clear() { fired = [] }
}

/// Waits until `condition` holds, woken by every change of the observable properties it reads.
@MainActor
func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: @escaping @MainActor @Sendable () -> Bool) async throws {
    try await withTimeout(timeout, what) { @MainActor in
        while true {
            let (changed, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            let holds = withObservationTracking {
                condition()
            } onChange: {
                sink.yield()
            }
            if holds { return }
            for await _ in changed { break }
            await Task.yield()  // onChange runs before the new value is set
        }
    }
}

/// The Observation models (`LiveObjectModel`, `LiveCollectionModel`, `LiveStreamModel`) against the real daemon
/// and cloud: each property changes exactly when a notification changes it, through a remote change, a pending
/// local write and a daemon restart; a released model ends its daemon token.
@Suite(.serialized) struct ObservationModelTests {
    @MainActor
    @Test func anObjectModelsPropertiesChangeExactlyWhenTheNotificationsSaySo() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        try await cluster.put("notes", "o1", ["text": "one"])
        let daemon = try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "models")
        defer { daemon.close() }
        var note: LiveObjectModel<Note>? = LiveObjectModel(daemon.object(collection: "notes", id: "o1", as: Note.self))
        try await followObject(note!, cluster)

        // Released: its daemon token ends.
        #expect(try await daemon.connection().stats().tokens == 1)
        note = nil
        try await eventually("the released model's token to end") { try await daemon.connection().stats().tokens == 0 }
    }

    @MainActor
    private func followObject(_ model: LiveObjectModel<Note>, _ cluster: TestCluster) async throws {
        try await waitUntil("fresh v1") { model.dataStatus == .fresh && model.loadingStatus == .loaded }
        #expect(model.model == Note(text: "one") && model.version == 1 && !model.pendingWrites && model.error == nil)

        let changes = PropertyChanges()
        changes.track("model") { [weak model] in _ = model?.model }
        changes.track("snapshot") { [weak model] in _ = model?.snapshot }
        changes.track("dataStatus") { [weak model] in _ = model?.dataStatus }
        changes.track("loadingStatus") { [weak model] in _ = model?.loadingStatus }
        changes.track("pendingWrites") { [weak model] in _ = model?.pendingWrites }
        changes.track("error") { [weak model] in _ = model?.error }

        // A remote change: a new snapshot and model, the statuses as they were.
        try await cluster.put("notes", "o1", ["text": "two"])
        try await waitUntil("v2") { model.version == 2 }
        await Task.yield()
        #expect(changes.fired == ["model", "snapshot"])
        #expect(model.model == Note(text: "two"))

        // A local write, held up on its way to the cloud: shown at once, pending; then confirmed.
        changes.clear()
        try await cluster.fault(#"{"delayRequestsMs":1000}"#)
        let write = Task { try await model.write(Note(text: "local")) }
        try await waitUntil("the pending write") { model.pendingWrites }
        await Task.yield()
        #expect(changes.fired == ["model", "snapshot", "pendingWrites"])
        #expect(model.model == Note(text: "local") && model.version == 2)
        changes.clear()
        try await cluster.fault(#"{"delayRequestsMs":0}"#)
        #expect(try await write.value == 3)
        try await waitUntil("the confirmation") { !model.pendingWrites && model.version == 3 }
        await Task.yield()
        #expect(changes.fired == ["snapshot", "pendingWrites"], "the same data, confirmed: the model stays")

        // The daemon restarts: loading, then loaded again; the data is the same.
        changes.clear()
        #expect(cluster.stopDaemon() == 0)
        try await waitUntil("loading while the daemon is away") { model.loadingStatus == .loading }
        try await cluster.startDaemon()
        try await waitUntil("loaded again") { model.loadingStatus == .loaded }
        await Task.yield()
        #expect(changes.fired == ["loadingStatus"])
        #expect(model.dataStatus == .fresh && model.model == Note(text: "local") && model.version == 3)
        changes.clear()
        try await cluster.put("notes", "o1", ["text": "after"])
        try await waitUntil("v4 after the restart") { model.version == 4 }
        await Task.yield()
        #expect(changes.fired == ["model", "snapshot"])
    }

    @MainActor
    @Test func aCollectionModelFollowsItsWindowPagesAndPendingWrites() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        for (id, rank) in [("a", 10), ("b", 20), ("c", 30)] {
            try await cluster.put("tasks", id, ["text": .string(id), "rank": .integer(rank)])
        }
        let daemon = try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "models")
        defer { daemon.close() }
        var tasks: LiveCollectionModel<Note>? = LiveCollectionModel(
            daemon.collection("tasks", sort: SortParams(field: "rank"), pageSize: 2, as: Note.self)
        )
        let connection = try await daemon.connection()
        try await followCollection(tasks!, cluster, connection)

        #expect(try await connection.stats().tokens == 1)
        tasks = nil
        try await eventually("the released model's token to end") { try await connection.stats().tokens == 0 }
    }

    @MainActor
    private func followCollection(_ window: LiveCollectionModel<Note>, _ cluster: TestCluster, _ connection: LiveGateConnection) async throws {
        try await waitUntil("the fresh first page") { window.dataStatus == .fresh && window.loadingStatus == .loaded }
        #expect(window.models.map(\.text) == ["a", "b"] && window.count == 3 && window.hasNext && !window.hasPrevious)

        let changes = PropertyChanges()
        changes.track("models") { [weak window] in _ = window?.models }
        changes.track("count") { [weak window] in _ = window?.count }
        changes.track("hasNext") { [weak window] in _ = window?.hasNext }
        changes.track("pendingIDs") { [weak window] in _ = window?.pendingIDs }
        changes.track("loadingStatus") { [weak window] in _ = window?.loadingStatus }
        #expect(try await window.next())
        try await waitUntil("two pages") { window.models.count == 3 }
        await Task.yield()
        #expect(changes.fired == ["models", "hasNext", "loadingStatus"], "the page loading, then the whole result")
        #expect(window.models.map(\.text) == ["a", "b", "c"] && !window.hasNext)

        changes.clear()
        try await cluster.fault(#"{"delayRequestsMs":1000}"#)
        let write = Task { try await connection.update(collection: "tasks", id: "d", data: ["text": "d", "rank": 5]) }
        try await waitUntil("the pending write in the window") { window.pendingIDs == ["d"] }
        await Task.yield()
        #expect(window.models.map(\.text) == ["d", "a", "b", "c"])
        #expect(changes.fired == ["models", "pendingIDs"], "the count is the cloud's: it changes once confirmed")
        changes.clear()
        try await cluster.fault(#"{"delayRequestsMs":0}"#)
        _ = try await write.value
        try await waitUntil("the confirmation") { window.pendingIDs.isEmpty && window.count == 4 }
        await Task.yield()
        #expect(changes.fired == ["pendingIDs", "count"])
    }

    @MainActor
    @Test func aStreamModelKeepsTheNewestMessagesAndCountsResyncs() async throws {
        let cluster = try await TestCluster.start(cloudArguments: ["--stream", "songs"])
        defer { cluster.stop() }
        try await eventually("the daemon's realtime connection") { try await cluster.stats().connections == 1 }
        let daemon = try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "models")
        defer { daemon.close() }
        let songs = daemon.stream("songs", of: Note.self)
        try await songs.grantAccess(to: TestCluster.username, StreamAccess(publishers: [TestCluster.username], subscribers: [TestCluster.username]))
        let inbox = LiveStreamModel(songs, keeping: 2)
        try await waitUntil("listening") { inbox.isListening }
        for title in ["one", "two", "three"] { try await songs.send(Note(text: title), to: TestCluster.username) }
        try await waitUntil("three messages, the newest two kept") { inbox.messages.last?.message?.text == "three" }
        #expect(inbox.messages.map(\.message?.text) == ["two", "three"] && inbox.resyncs == 0)

        #expect(cluster.stopDaemon() == 0)
        try await cluster.startDaemon()
        try await waitUntil("the listening made again, with its resync") { inbox.resyncs == 1 }
        inbox.stop()
        #expect(!inbox.isListening)
    }
}
