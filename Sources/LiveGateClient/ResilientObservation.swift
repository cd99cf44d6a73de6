// Licensed under the Apache License, Version 2.0.

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
        AsyncThrowingStream { continuation in
            let task = Task {
                var filter = ResumeFilter()
                var failures = 0
                while !Task.isCancelled {
                    do {
                        try await withConnection(socketPath: socketPath, client: client) { connection in
                            let observation = try await connection.observeObject(collection: collection, id: id)
                            for try await change in observation.changes {
                                failures = 0
                                if filter.admit(change) { continuation.yield(change) }
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
                    if let notice = filter.disconnected() { continuation.yield(notice) }
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
