// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import Observation

/// A live object as an `@Observable` model (the reference SDKs' SwiftUI objects): its decoded model, snapshot,
/// statuses, pending writes and error are properties, updated on the main actor as the daemon's notifications
/// say, each only when it changes. Observing starts when the model is made and ends when it is released (or
/// ``stop()``).
///
/// ```swift
/// struct NoteView: View {
///     @State var note: LiveObjectModel<Note>
///     var body: some View {
///         Text(note.model?.text ?? (note.loadingStatus == .loading ? "…" : "none"))
///             .opacity(note.pendingWrites ? 0.5 : 1)
///     }
/// }
/// NoteView(note: LiveObjectModel(daemon.object(collection: "notes", id: "n1", as: Note.self)))
/// ```
@MainActor
@Observable
public final class LiveObjectModel<Model: Decodable & Sendable> {
    /// The object decoded as `Model`; `nil` when it does not exist, is not loaded yet, or does not decode.
    public private(set) var model: Model?
    /// The object as the daemon sent it (version, `updatedAt`, raw data).
    public private(set) var snapshot: ObjectSnapshot?
    public private(set) var dataStatus: DataStatus = .notExist
    public private(set) var loadingStatus: LoadingStatus = .loading
    /// The data includes writes of this host the cloud has not confirmed yet.
    public private(set) var pendingWrites = false
    /// The last load's failure, a rejected write, the daemon's refusal of the observation, or a model that does
    /// not decode; `nil` once a state without one arrives.
    public private(set) var error: LiveGateError?

    public var version: Int64? { snapshot?.version }

    @ObservationIgnored public let object: LiveObject<Model>
    @ObservationIgnored private var token: NotificationToken?
    @ObservationIgnored private var stopped = false

    /// Starts observing `object` (in the background: a refusal lands in ``error``, with `loadingStatus` `.error`).
    public init(_ object: LiveObject<Model>, policy: ObservePolicy? = nil, fields: [String]? = nil) {
        self.object = object
        Task { [weak self] in
            do {
                let token = try await object.observeOnMainActor(policy: policy, fields: fields) { [weak self] state in
                    self?.apply(state)
                }
                guard let self, !self.stopped else { return token.invalidate() }
                self.token = token
            } catch {
                self?.refused(error)
            }
        }
    }

    /// Ends the observation now (releasing the model does too).
    public func stop() {
        stopped = true
        token?.invalidate()
        token = nil
    }

    private func apply(_ state: LiveSnapshot<Model>) {
        if snapshot != state.snapshot {
            // The model changes with the data, not with the version alone (a pending write's confirmation).
            if snapshot?.data != state.snapshot?.data || model == nil { model = state.model }
            snapshot = state.snapshot
        }
        setIfChanged(self, \.dataStatus, state.dataStatus)
        setIfChanged(self, \.loadingStatus, state.loadingStatus)
        setIfChanged(self, \.pendingWrites, state.pendingWrites)
        setIfChanged(self, \.error, state.error)
    }

    private func refused(_ failure: any Error) {
        setIfChanged(self, \.loadingStatus, .error)
        setIfChanged(self, \.error, .describing(failure))
    }
}

extension LiveObjectModel where Model: Encodable {
    /// Writes `model` as the object's data and waits for the cloud; the properties show it at once, pending.
    @discardableResult
    public func write(_ model: Model, ifVersion: Int64? = nil) async throws -> Int64 {
        try await object.write(model, ifVersion: ifVersion)
    }
}
