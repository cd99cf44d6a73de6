// Licensed under the Apache License, Version 2.0.

/// A retry waiting out its backoff: resumed by its timer, or early.
struct RetryPause: Sendable {
    let continuation: CheckedContinuation<Void, Never>
    /// Sleeps out the backoff off the engine's executor (the engine's event loop may be gone by the time a
    /// forgotten timer fires), and is cancelled when the pause ends early.
    let timer: Task<Void, any Error>
}

/// The retries waiting out their backoff, by id.
struct RetryPausing {
    var pauses: [Int: RetryPause] = [:]
    var nextID = 0
}

extension LiveClient {
    /// Waits before retrying a cloud request that failed for the `failures`-th time in a row: from about
    /// 400 ms up to 30 s (``Backoff``), or less: every pause ends at once when the realtime connection is
    /// made again (the cloud answers again: fetches and writes need not wait out a long backoff).
    ///
    /// - Throws: `CancellationError` when the engine stops meanwhile.
    func retryPause(after failures: Int) async throws {
        let delay = Backoff.delay(attempt: failures + 2, jitter: Double.random(in: 0..<1))
        connectionWatch.retryPauses.nextID += 1
        let id = connectionWatch.retryPauses.nextID
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                guard !Task.isCancelled else { return continuation.resume() }
                let timer = Task.detached { [weak self] in
                    try await Task.sleep(for: delay)
                    await self?.endRetryPause(id)
                }
                connectionWatch.retryPauses.pauses[id] = RetryPause(continuation: continuation, timer: timer)
            }
        } onCancel: {
            Task { await self.endRetryPause(id) }
        }
        try Task.checkCancellation()
    }

    private func endRetryPause(_ id: Int) {
        guard let pause = connectionWatch.retryPauses.pauses.removeValue(forKey: id) else { return }
        pause.timer.cancel()
        pause.continuation.resume()
    }

    /// Ends every retry pause now (the realtime connection was made again).
    func endRetryPauses() {
        for id in connectionWatch.retryPauses.pauses.keys { endRetryPause(id) }
    }
}
