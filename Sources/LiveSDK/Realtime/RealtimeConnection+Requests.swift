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
        let connection = requestBook.generation
        var refs: [Int64] = []
        refs.reserveCapacity(requests.count)
        for request in requests {
            let ref = queue(request.op, request.topic, since: request.since)
            if request.op == .subscribe, request.since != nil { progress.resuming[ref] = request.topic }
            refs.append(ref)
        }
        await writeOutgoing()
        // Everything below in the body: the call may suspend before running it (an executor switch), and an answer
        // or the connection's loss handled meanwhile would find no waiter to give it to.
        return await withCheckedContinuation { continuation in
            let group = AnswerGroup(count: refs.count)
            // Not sent, or sent on a connection that is gone (a new one may be up already): no answer will come.
            let linkLost = writer == nil || connection != requestBook.generation
            for (index, ref) in refs.enumerated() {
                // The actor is reentrant: an answer may have arrived while the write was suspended.
                if let early = requestBook.earlyAnswers.removeValueShrinking(forKey: ref) {
                    group.answers[index] = early
                    continue
                }
                guard requestBook.unsent.removeShrinking(ref) == nil, !linkLost else { continue }
                requestBook.groupedAcks[ref] = (group, index)
                group.awaited += 1
            }
            if group.awaited == 0 {
                continuation.resume(returning: group.answers)
            } else {
                group.continuation = continuation
            }
        }
    }

    /// Queues a request for the next batch (see ``writeOutgoing()``); returns its ref.
    func queue(_ op: RealtimeClientMessage.Operation, _ topic: Topic, since: Int64? = nil) -> Int64 {
        requestBook.nextRef += 1
        requestBook.outgoing.append(RealtimeClientMessage(op: op, ref: requestBook.nextRef, topic: topic, since: since))
        return requestBook.nextRef
    }

    /// Writes the queued requests, a batch per message: one batch at a time, the next once the cloud has
    /// answered the last request of the one before (requests made meanwhile go in the next). A write that
    /// fails leaves its requests unanswered: their senders get `nil`, as the connection goes down.
    func writeOutgoing() async {
        guard !requestBook.writing else { return }
        requestBook.writing = true
        defer { requestBook.writing = false }
        while !requestBook.outgoing.isEmpty, requestBook.awaitedRef == nil {
            // As many as the cloud takes in one message: by count, and by size (a topic's name is what varies).
            var requests: [RealtimeClientMessage] = []
            var bytes = 32
            for request in requestBook.outgoing.prefix(RealtimeClientBatch.maximumRequests) {
                bytes += request.topic.description.utf8.count + 80
                if !requests.isEmpty && bytes > RealtimeClientBatch.maximumBytes / 2 { break }
                requests.append(request)
            }
            requestBook.outgoing.removeFirst(requests.count)
            if requestBook.outgoing.isEmpty { requestBook.outgoing = [] }  // the storage a burst grew it to, given back
            guard let writer else {
                failed(requests)
                continue
            }
            requestBook.awaitedRef = requests.last?.ref
            do {
                // LiveJSON's encoder: a batch of a thousand subscriptions cost Foundation's a millisecond.
                let encoder = SortedJSONEncoder()
                let bytes = try requests.count == 1 ? encoder.encode(requests[0]) : encoder.encode(RealtimeClientBatch(requests: requests))
                try await writer.write(.text(String(decoding: bytes, as: UTF8.self)))
            } catch {
                logger.debug("realtime write failed", metadata: ["error": "\(error)", "requests": "\(requests.count)"])
                requestBook.awaitedRef = nil
                failed(requests)
            }
        }
    }

    /// Requests that were not sent: their waiters (if waiting already) get `nil`, and so do those still to wait.
    private func failed(_ requests: [RealtimeClientMessage]) {
        for request in requests {
            progress.resuming.removeValueShrinking(forKey: request.ref)
            // Nobody waits for an unsubscription (and one failed after a disconnection is no longer listed).
            if request.op == .unsubscribe {
                requestBook.unawaited.removeShrinking(request.ref)
                continue
            }
            if let (group, index) = requestBook.groupedAcks.removeValueShrinking(forKey: request.ref) {
                group.answer(index, nil)
            } else {
                requestBook.unsent.insert(request.ref)
            }
        }
    }

    func answered(_ ref: Int64, _ answer: RealtimeServerMessage) {
        if ref == requestBook.awaitedRef {
            // The batch is answered: the requests made meanwhile go out as the next.
            requestBook.awaitedRef = nil
            if !requestBook.outgoing.isEmpty { Task { await self.writeOutgoing() } }
        }
        if let (group, index) = requestBook.groupedAcks.removeValueShrinking(forKey: ref) {
            group.answer(index, answer)
        } else if requestBook.unawaited.removeShrinking(ref) != nil {
            return
        } else if ref <= requestBook.nextRef {
            requestBook.earlyAnswers[ref] = answer
        }
    }
}
