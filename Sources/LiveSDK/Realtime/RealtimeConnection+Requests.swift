// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import LiveCloudAPI
import LiveJSON
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import Synchronization
import WSClient

// Requests to the cloud: queued, written in batches, their answers matched by ref.
extension RealtimeConnection {
    /// Sends requests and waits for their answers (an ack or an error each), in the order of `requests`: `nil`
    /// for a request not sent, or sent on a connection that went down. One wait takes every answer, so a burst
    /// of subscriptions made from one task (``acquire(_:)``) costs that task's frames once.
    ///
    /// Requests are batched (see ``writeOutgoing()``): one made while a batch awaits its answer goes in the next,
    /// with every request made meanwhile, as one `batch` message. A burst of subscriptions (new observations, a
    /// reconnection's resubscriptions) costs a message per batch, not one per topic; a request alone goes out
    /// at once.
    func sendAll(
        _ requests: [(op: RealtimeClientMessage.Operation, topic: Topic, since: Int64?)]
    ) async -> [RealtimeServerMessage?] {
        guard writer != nil, !requests.isEmpty else { return Array(repeating: nil, count: requests.count) }
        let connection = wire.generation
        let refs = requests.map { wire.queue($0.op, $0.topic, since: $0.since) }
        await writeOutgoing()
        // Everything below in the body: the call may suspend before running it (an executor switch), and an answer
        // or the connection's loss handled meanwhile would find no waiter to give it to.
        return await withCheckedContinuation { continuation in
            let group = AnswerGroup(count: refs.count)
            for (index, ref) in refs.enumerated() {
                // The actor is reentrant: an answer may have arrived while the write was suspended.
                switch wire.wait(for: ref, queuedOn: connection, linkUp: writer != nil) {
                case .answered(let answer): group.answers[index] = answer
                case .noAnswer: continue
                case .pending:
                    answerWaits[ref] = (group, index)
                    group.awaited += 1
                }
            }
            if group.awaited == 0 {
                continuation.resume(returning: group.answers)
            } else {
                group.continuation = continuation
            }
        }
    }

    /// Writes the queued requests, a batch per message: one batch at a time, the next once the cloud has
    /// answered the last request of the one before (requests made meanwhile go in the next). A write that
    /// fails leaves its requests unanswered: their senders get `nil`, as the connection goes down.
    func writeOutgoing() async {
        guard !writing else { return }
        writing = true
        defer { writing = false }
        while let batch = wire.nextBatch() {
            guard let writer else {
                perform(wire.notWritten(batch))
                continue
            }
            do {
                // LiveJSON's encoder, not Foundation's: a batch holds up to a thousand subscriptions.
                let encoder = SortedJSONEncoder()
                let bytes = try batch.count == 1 ? encoder.encode(batch[0]) : encoder.encode(RealtimeClientBatch(requests: batch))
                try await writer.write(.text(String(decoding: bytes, as: UTF8.self)))
            } catch {
                logger.debug("realtime write failed", metadata: ["error": "\(error)", "requests": "\(batch.count)"])
                perform(wire.notWritten(batch))
            }
        }
    }
}
