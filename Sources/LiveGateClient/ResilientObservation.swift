// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import LiveGateProtocol

extension LiveGateConnection {
    /// Observes an object for as long as the stream is consumed, across daemon restarts and lost
    /// connections: it reconnects with backoff (0.1 s doubling to 5 s, with jitter) and re-observes, and the
    /// observer sees `loadingStatus` go to `loading` and back, never a lost or repeated snapshot version
    /// (see ``ResumeFilter``). The stream ends with an error only when the daemon refuses the observation
    /// itself (bad names, not permitted).
    public static func observeObjectResiliently(
        socketPath: String = LiveGateConnection.defaultSocketPath,
        client: String,
        collection: String,
        id: String
    ) -> AsyncThrowingStream<ObjectChangedParams, any Error> {
        resiliently(socketPath: socketPath, client: client, initial: ResumeFilter()) { connection, filter, deliver in
            let observation = try await connection.observeObject(collection: collection, id: id)
            for try await change in observation.changes where filter.admit(change) { deliver(change) }
        } disconnected: { filter in
            filter.disconnected()
        }
    }

    /// Observes a query's first page for as long as the stream is consumed, across daemon restarts and
    /// lost connections (reconnecting as ``observeObjectResiliently(socketPath:client:collection:id:)`` does).
    /// When the connection is lost the observer gets the window it has with `loadingStatus: loading`; the
    /// first update after a reconnection has `reset: true` — its changes start from an empty window and
    /// carry the whole window again (changes made meanwhile included), so a consumer that applies change
    /// sets replaces what it holds. The stream ends with an error only when the daemon refuses the
    /// observation itself.
    public static func observeCollectionResiliently(
        socketPath: String = LiveGateConnection.defaultSocketPath,
        client: String,
        collection: String,
        query: QueryParams? = nil,
        pageSize: Int? = nil
    ) -> AsyncThrowingStream<CollectionUpdate, any Error> {
        resiliently(socketPath: socketPath, client: client, initial: CollectionUpdate?.none) { connection, last, deliver in
            let observation = try await connection.observeCollection(collection: collection, query: query, pageSize: pageSize)
            var first = true
            for try await update in observation.updates {
                var change = update.change
                if first { change.reset = true }  // a new token's window starts from empty
                first = false
                let delivered = CollectionUpdate(change: change, items: update.items)
                last = delivered
                deliver(delivered)
            }
        } disconnected: { last in
            guard let seen = last, seen.change.loadingStatus != .loading else { return nil }
            var notice = seen.change
            notice.changes = ChangeSet()
            notice.items = [:]
            notice.reset = nil
            notice.loadingStatus = .loading
            last = CollectionUpdate(change: notice, items: seen.items)
            return last
        }
    }

    /// The reconnect loop of the resilient observations: `observe` runs on each new connection (delivering
    /// through its third argument, with `state` kept across connections); when the connection is lost,
    /// `disconnected` says what the observer is told, then it reconnects with backoff.
    private static func resiliently<Element: Sendable, State: Sendable>(
        socketPath: String,
        client: String,
        initial: State,
        _ observe: @escaping @Sendable (LiveGateConnection, inout State, (Element) -> Void) async throws -> Void,
        disconnected: @escaping @Sendable (inout State) -> Element?
    ) -> AsyncThrowingStream<Element, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var state = initial
                var failures = 0
                while !Task.isCancelled {
                    do {
                        try await withConnection(socketPath: socketPath, client: client) { connection in
                            try await observe(connection, &state) { element in
                                failures = 0
                                continuation.yield(element)
                            }
                        }
                    } catch let error as LiveGateError
                        where error.code != nil && error.code != .cloudUnavailable
                        && error.code != .limitExceeded
                    {
                        continuation.finish(throwing: error)  // the daemon refused the observation itself
                        return
                    } catch {
                        // The daemon went away: tell the observer, then try again.
                    }
                    if let notice = disconnected(&state) { continuation.yield(notice) }
                    failures += 1
                    let base = min(5.0, 0.1 * Double(1 << min(failures - 1, 6)))
                    do {
                        try await Task.sleep(for: .seconds(base * Double.random(in: 0.5...1.0)))
                    } catch {
                        break
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
