// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import Synchronization

/// One realtime connection, as the hub sees it: a bounded queue of encoded messages to write.
final class RealtimeSubscriber: Sendable {
    let id: Int
    /// Encoded messages, in order. Finishes when the subscriber is cut off for being too slow.
    let messages: AsyncStream<String>
    private let sink: AsyncStream<String>.Continuation
    private let overflowed = Mutex(false)

    init(id: Int, queueLimit: Int) {
        self.id = id
        (messages, sink) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingOldest(queueLimit))
    }

    /// Queues `text`; returns `false` (and ends the stream) when the queue was full.
    @discardableResult
    func send(_ text: String) -> Bool {
        switch sink.yield(text) {
        case .enqueued: return true
        case .dropped, .terminated:
            overflowed.withLock { $0 = true }
            sink.finish()
            return false
        @unknown default: return false
        }
    }

    var wasCutOff: Bool { overflowed.withLock { $0 } }
    /// Set when the server closes the connection on purpose (fault injection).
    var wasDropped: Bool { dropped.withLock { $0 } }
    private let dropped = Mutex(false)

    func finish() { sink.finish() }

    /// Ends the stream so that the connection closes (fault injection).
    func drop() {
        dropped.withLock { $0 = true }
        sink.finish()
    }
}

/// Topic subscriptions and fan-out. Each event is encoded once and the same text is queued to every
/// subscriber of its topic. Also keeps the counters behind `/v1/stats`.
final class RealtimeHub: Sendable {
    private struct State {
        var subscribers: [Int: RealtimeSubscriber] = [:]
        var topics: [Topic: Set<Int>] = [:]
        var nextID = 0
        var eventsSent = 0
        var fetches: [String: Int] = [:]
    }

    private let state = Mutex(State())
    let queueLimit: Int

    init(queueLimit: Int = 10_000) { self.queueLimit = queueLimit }

    func connect() -> RealtimeSubscriber {
        state.withLock { state in
            state.nextID += 1
            let subscriber = RealtimeSubscriber(id: state.nextID, queueLimit: queueLimit)
            state.subscribers[subscriber.id] = subscriber
            return subscriber
        }
    }

    func disconnect(_ subscriber: RealtimeSubscriber) {
        state.withLock { state in
            state.subscribers[subscriber.id] = nil
            for topic in state.topics.keys {
                state.topics[topic]?.remove(subscriber.id)
                if state.topics[topic]?.isEmpty == true { state.topics[topic] = nil }
            }
        }
        subscriber.finish()
    }

    /// Subscribes and queues `ack` in one step, so every event published after the subscription follows the ack.
    func subscribe(_ subscriber: RealtimeSubscriber, to topic: Topic, ack: String) {
        state.withLock { state in
            state.topics[topic, default: []].insert(subscriber.id)
            subscriber.send(ack)
        }
    }

    func unsubscribe(_ subscriber: RealtimeSubscriber, from topic: Topic, ack: String) {
        state.withLock { state in
            state.topics[topic]?.remove(subscriber.id)
            if state.topics[topic]?.isEmpty == true { state.topics[topic] = nil }
            subscriber.send(ack)
        }
    }

    /// Publishes a committed write to the subscribers of the entity's topic.
    func publish(seq: Int64, entity: Entity) {
        let topic = Topic.object(entity.key)
        let text: String
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            text = String(decoding: try encoder.encode(RealtimeServerMessage.event(seq: seq, topic: topic, entity: entity)), as: UTF8.self)
        } catch {
            return
        }
        state.withLock { state in
            guard let ids = state.topics[topic] else { return }
            for id in ids {
                if state.subscribers[id]?.send(text) == true { state.eventsSent += 1 }
            }
        }
    }

    /// Closes every realtime connection (fault injection).
    func dropAll() {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) { subscriber.drop() }
    }

    func recordFetch(_ key: EntityKey) {
        state.withLock { $0.fetches[key.description, default: 0] += 1 }
    }

    func stats() -> CloudStats {
        state.withLock { state in
            CloudStats(
                connections: state.subscribers.count,
                subscriptions: state.topics.mapValues(\.count).reduce(into: [:]) { $0[$1.key.description] = $1.value },
                fetches: state.fetches,
                eventsSent: state.eventsSent
            )
        }
    }
}
