// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveGateProtocol
import Observation

/// A live query's window as an `@Observable` model: its decoded models and objects in order, the query's count,
/// paging, statuses, pending writes and error are properties, updated on the main actor as the daemon's
/// notifications say, each only when it changes. Observing starts when the model is made and ends when it is
/// released (or ``stop()``).
///
/// ```swift
/// let messages = LiveCollectionModel(daemon.collection("messages", sort: SortParams(field: "rank"), pageSize: 20, as: Message.self))
/// List(messages.models, id: \.id) { Text($0.text) }.onAppear { Task { try await messages.next() } }
/// ```
@MainActor
@Observable
public final class LiveCollectionModel<Model: Decodable & Sendable> {
    /// The window's objects decoded as `Model`, in the query's order (one that does not decode is left out).
    public private(set) var models: [Model] = []
    /// The window's objects as the daemon sent them, in order.
    public private(set) var objects: [ObjectSnapshot] = []
    /// How the window changed last (relative to an empty window when `reset`): for a list's batch updates.
    public private(set) var changes = ChangeSet()
    /// How many objects match the query in all, beyond the window too.
    public private(set) var count = 0
    public private(set) var hasNext = false
    public private(set) var hasPrevious = false
    public private(set) var dataStatus: DataStatus = .notExist
    public private(set) var loadingStatus: LoadingStatus = .loading
    /// The ids of the window's objects that include writes of this host not confirmed yet, sorted.
    public private(set) var pendingIDs: [String] = []
    public private(set) var error: LiveGateError?

    @ObservationIgnored public let collection: LiveCollection<Model>
    @ObservationIgnored private var observation: LiveCollectionObservation?
    @ObservationIgnored private var stopped = false

    /// Starts observing `collection`'s window (in the background: a refusal lands in ``error``).
    public init(_ collection: LiveCollection<Model>, anchor: CollectionAnchorParam? = nil) {
        self.collection = collection
        Task { [weak self] in
            do {
                let observation = try await collection.observeOnMainActor(anchor: anchor) { [weak self] window in
                    self?.apply(window)
                }
                guard let self, !self.stopped else { return observation.invalidate() }
                self.observation = observation
            } catch {
                self?.refused(error)
            }
        }
    }

    /// One more page at the end of the window; `false` when there is none (or the observation has not started).
    @discardableResult
    public func next() async throws -> Bool { try await observation?.nextPage() ?? false }

    /// One more page at the start (for windows anchored at the last page); `false` when there is none.
    @discardableResult
    public func previous() async throws -> Bool { try await observation?.previousPage() ?? false }

    /// Back to one page.
    @discardableResult
    public func reset() async throws -> Bool { try await observation?.resetPage() ?? false }

    /// Ends the observation now (releasing the model does too).
    public func stop() {
        stopped = true
        observation?.invalidate()
        observation = nil
    }

    private func apply(_ window: LiveCollectionSnapshot<Model>) {
        if objects != window.objects {
            if objects.map(\.data) != window.objects.map(\.data) { models = window.models }
            objects = window.objects
        }
        setIfChanged(self, \.changes, window.changes)
        setIfChanged(self, \.count, window.count)
        setIfChanged(self, \.hasNext, window.hasNext)
        setIfChanged(self, \.hasPrevious, window.hasPrevious)
        setIfChanged(self, \.dataStatus, window.dataStatus)
        setIfChanged(self, \.loadingStatus, window.loadingStatus)
        setIfChanged(self, \.pendingIDs, window.pendingIDs)
        setIfChanged(self, \.error, window.error)
    }

    private func refused(_ failure: any Error) {
        setIfChanged(self, \.loadingStatus, .error)
        setIfChanged(self, \.error, .describing(failure))
    }
}
