// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveJSON
import Synchronization

/// One state of a typed live object: the decoded model and the statuses, together, frozen.
public struct LiveSnapshot<Model: Sendable>: Sendable {
    /// The object decoded as `Model`; `nil` when it does not exist, could not be loaded, or did not decode
    /// (then `error` says why).
    public let model: Model?
    /// The object as the daemon sent it (its version, `updatedAt`, the raw data).
    public let snapshot: ObjectSnapshot?
    public let dataStatus: DataStatus
    public let loadingStatus: LoadingStatus
    /// The daemon's error (a failed load, a rejected write), or a decoding failure (`code` nil).
    public let error: LiveGateError?
    /// A resync notice: the full state follows in the next snapshot.
    public let resync: Bool
    /// The snapshot includes writes of this host the cloud has not confirmed yet.
    public let pendingWrites: Bool

    public var version: Int64? { snapshot?.version }

    init(_ change: ObjectChangedParams, as type: Model.Type) where Model: Decodable {
        snapshot = change.snapshot
        dataStatus = change.dataStatus
        loadingStatus = change.loadingStatus
        resync = change.resync == true
        pendingWrites = change.pendingWrites == true
        var failure = change.error.map(LiveGateError.init)
        var model: Model?
        if let data = change.snapshot?.data {
            do {
                model = try data.decode(as: Model.self)
            } catch {
                failure = LiveGateError(code: nil, message: "the object's data does not decode as \(Model.self): \(error)")
            }
        }
        self.model = model
        self.error = failure
    }
}

/// A live object of the daemon, typed (the reference SDKs' `LiveObject`).
///
/// ```swift
/// struct Note: Codable, Sendable { var text: String }
/// let note = daemon.object(collection: "notes", id: "n1", as: Note.self)
/// let token = try await note.observeOnMainActor { snapshot in label.text = snapshot.model?.text }
/// ```
///
/// Made from a ``LiveGateClient``, its observations outlive the daemon: across a restart the handler sees
/// `loadingStatus` go to `loading` and back, never a lost or repeated snapshot version (``ResumeFilter``).
/// Made from a ``LiveGateConnection``, they end with the connection.
public struct LiveObject<Model: Decodable & Sendable>: Sendable {
    let source: ConnectionSource
    public let collection: String
    public let id: String

    /// Every state of the object, in order, until the task iterating the sequence is cancelled (which ends
    /// the observation) or the observation ends.
    public func snapshots(policy: ObservePolicy? = nil, fields: [String]? = nil) async throws -> AsyncThrowingStream<LiveSnapshot<Model>, any Error> {
        let (stream, sink) = AsyncThrowingStream.makeStream(of: LiveSnapshot<Model>.self)
        let token = try await start(once: false, policy: policy, fields: fields, ended: { sink.finish() }) { sink.yield($0) }
        sink.onTermination = { _ in token.invalidate() }
        return stream
    }

    /// Calls `handler` with every state of the object, one after another on a task of the library's, until
    /// the returned token is invalidated or released. (``observeOnMainActor(policy:fields:_:)`` calls it on
    /// the main actor instead.)
    /// - Parameter fields: only changes of these top-level fields (the filter is this observation's own).
    public func observe(
        policy: ObservePolicy? = nil,
        fields: [String]? = nil,
        _ handler: @escaping @Sendable (LiveSnapshot<Model>) -> Void
    ) async throws -> NotificationToken {
        try await start(once: false, policy: policy, fields: fields) { snapshot in handler(snapshot) }
    }

    /// As ``observe(policy:fields:_:)``, calling `handler` on the main actor, one state after another (for
    /// UI code).
    public func observeOnMainActor(
        policy: ObservePolicy? = nil,
        fields: [String]? = nil,
        _ handler: @escaping @MainActor @Sendable (LiveSnapshot<Model>) -> Void
    ) async throws -> NotificationToken {
        try await start(once: false, policy: policy, fields: fields) { snapshot in await handler(snapshot) }
    }

    /// Calls `handler` exactly once (the cached version when there is one, else the cloud's answer).
    public func observeOnce(policy: ObservePolicy? = nil, _ handler: @escaping @Sendable (LiveSnapshot<Model>) -> Void) async throws
        -> NotificationToken
    {
        try await start(once: true, policy: policy, fields: nil) { snapshot in handler(snapshot) }
    }

    private func start(
        once: Bool,
        policy: ObservePolicy?,
        fields: [String]?,
        ended: @escaping @Sendable () -> Void = {},
        _ deliver: @escaping @Sendable (LiveSnapshot<Model>) async -> Void
    ) async throws -> NotificationToken {
        let (collection, id) = (self.collection, self.id)
        // Observed again after a reconnection from the last version delivered: the daemon then tells nothing
        // twice, a skip with a resync notice first, and an unchanged object with an `unchanged` notice.
        let resumeFrom = Mutex<Int64?>(nil)
        let loop = ObservationLoop<ObjectChangedParams>(source: source, once: once) { connection in
            let since = once ? nil : resumeFrom.withLock { $0 }
            let observation = try await connection.observeObject(
                collection: collection,
                id: id,
                policy: policy,
                once: once,
                sinceVersion: since,
                fields: fields
            )
            return (observation.token, observation.changes)
        }
        let reconnects = source.reconnects
        return try await loop.start(ResumeFilter(), ended: ended) { filter, change in
            // Across reconnections, only what is new reaches the handler.
            if !reconnects {
                await deliver(LiveSnapshot(change, as: Model.self))
            } else if let passed = filter.pass(change) {
                resumeFrom.withLock { $0 = filter.resumeVersion }
                await deliver(LiveSnapshot(passed, as: Model.self))
            }
            return !once
        } lost: { filter in
            if let notice = filter.disconnected() { await deliver(LiveSnapshot(notice, as: Model.self)) }
        } refused: { filter, error in
            var change = filter.last ?? ObjectChangedParams(token: 0, snapshot: nil, dataStatus: .notExist, loadingStatus: .error)
            change.loadingStatus = .error
            change.error = RPCError(code: error.code ?? .internalError, message: error.message)
            await deliver(LiveSnapshot(change, as: Model.self))
        }
    }
}

extension LiveObject where Model: Encodable {
    /// Writes `model` as the object's data and waits for the cloud's confirmation; observers see it at once,
    /// marked pending. Returns the stored version.
    @discardableResult
    public func write(_ model: Model, ifVersion: Int64? = nil) async throws -> Int64 {
        try await source.current().update(collection: collection, id: id, data: try JSONValue(encoding: model), ifVersion: ifVersion).version
    }
}

extension LiveGateConnection {
    /// A typed handle on an object: cheap; observing it is what costs. Its observations end with this connection.
    public func object<Model: Decodable & Sendable>(collection: String, id: String, as type: Model.Type = Model.self) -> LiveObject<Model> {
        LiveObject(source: .connection(self), collection: collection, id: id)
    }
}

extension LiveGateClient {
    /// A typed handle on an object whose observations outlive the daemon's restarts.
    public func object<Model: Decodable & Sendable>(collection: String, id: String, as type: Model.Type = Model.self) -> LiveObject<Model> {
        LiveObject(source: .client(self), collection: collection, id: id)
    }
}

extension JSONValue {
    /// This value decoded as `T`: exactly (LiveJSON's decoder: an `Int64` field takes any integer in its range);
    /// a type that decoder does not take (`Data` as base64, say) is decoded as Foundation's `JSONDecoder` does.
    func decode<T: Decodable>(as type: T.Type) throws -> T {
        if let decoded = try? JSONValueDecoder.decode(T.self, from: self) { return decoded }
        var writer = JSONWriter()
        try writer.write(self)
        return try JSONDecoder().decode(T.self, from: Data(writer.bytes))
    }

    /// `value` encoded to JSON (LiveJSON's encoder, or Foundation's for a type it does not take).
    init(encoding value: some Encodable) throws {
        let bytes: [UInt8]
        do {
            bytes = try SortedJSONEncoder(refusing: [Data.self, URL.self, Decimal.self]).encode(value)
        } catch is SortedJSONEncoder.Unsupported {
            bytes = Array(try JSONEncoder().encode(value))
        }
        self = try JSONValue(parsing: bytes)
    }
}
