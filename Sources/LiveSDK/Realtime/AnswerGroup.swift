// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// One wait for the answers of several requests (``RealtimeConnection/sendAll(_:)``). Used on the realtime
/// connection's executor only.
final class AnswerGroup {
    var answers: [RealtimeServerMessage?]
    /// How many answers are still awaited.
    var awaited = 0
    var continuation: CheckedContinuation<[RealtimeServerMessage?], Never>?

    init(count: Int) { answers = Array(repeating: nil, count: count) }

    /// The answer at `index` came (`nil`: none will); the last awaited ends the wait.
    func answer(_ index: Int, _ message: RealtimeServerMessage?) {
        answers[index] = message
        awaited -= 1
        guard awaited == 0, let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: answers)
    }
}
