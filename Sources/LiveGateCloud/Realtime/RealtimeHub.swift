// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import Synchronization

/// One realtime connection, as the hub sees it: a bounded queue of encoded messages to write.
package final class RealtimeSubscriber: Sendable {
    let id: Int
    /// Who the connection belongs to (its bearer token's user).
    let user: String
    /// Encoded messages, in order. Finishes when the subscriber is cut off for being too slow.
    package let messages: AsyncStream<String>
    private let sink: AsyncStream<String>.Continuation
    private let overflowed = Mutex(false)

    init(id: Int, user: String, queueLimit: Int) {
        self.id = id
        self.user = user
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

    /// Why the server closes the connection on purpose.
    enum CloseReason: Sendable {
        case faultInjection, shuttingDown
        /// The event log is not being published (PostgreSQL's event pump lost its connection): a subscription
        /// acknowledged now could miss what was committed.
        case eventLogBehind

        var message: String {
            switch self {
            case .faultInjection: "fault injection: connection dropped"
            case .shuttingDown: "the cloud is shutting down; reconnect later"
            case .eventLogBehind: "the cloud's event log is not being read (its database connection is down); reconnect later"
            }
        }
    }

    /// Set when the server closes the connection on purpose.
    var closeReason: CloseReason? { closing.withLock { $0 } }
    private let closing = Mutex<CloseReason?>(nil)

    func finish() { sink.finish() }

    /// Ends the stream (what is queued is still written) so that the connection closes, saying why.
    func close(_ reason: CloseReason) {
        closing.withLock { $0 = $0 ?? reason }
        sink.finish()
    }
}

/// Topic subscriptions and fan-out. Each event is encoded once and the same text is queued to every
/// subscriber of its topic. Also keeps the counters behind `/v1/stats`.
package final class RealtimeHub: Sendable {
    private struct State {
        var subscribers: [Int: RealtimeSubscriber] = [:]
        var topics: [Topic: Set<Int>] = [:]
        /// Subscriptions being resumed: live events of the topic wait here (encoded, with their seq)
        /// until the replay from the log has been sent.
        var replaying: [SubscriptionKey: [(seq: Int64, text: String)]] = [:]
        /// The last event published (events are published in commit order, so every lower seq is in the log).
        var lastPublished: Int64 = 0
        /// Subscription requests waiting for the events committed before them to be published
        /// (``published(through:within:)``), by waiter id.
        var publicationWaiters: [Int: Waiter] = [:]
        var nextWaiter = 0
        var nextID = 0
        var eventsSent = 0
        var fetches: [String: Int] = [:]
        var readRequests = 0
        var realtimeMessages = 0
        /// The query topics with subscribers, by collection (an event is matched against its collection's).
        var queryTopics: [String: Set<Topic>] = [:]

        /// Counts every event up to `seq` published; returns the waiters that this lets go (resumed by the caller,
        /// outside the lock).
        mutating func published(_ seq: Int64) -> [Waiter] {
            lastPublished = max(lastPublished, seq)
            guard !publicationWaiters.isEmpty else { return [] }
            let due = publicationWaiters.filter { $0.value.seq <= lastPublished }
            for id in due.keys { publicationWaiters[id] = nil }
            return Array(due.values)
        }

        mutating func add(_ subscriber: Int, to topic: Topic) {
            topics[topic, default: []].insert(subscriber)
            if case .query(let collection, _) = topic { queryTopics[collection, default: []].insert(topic) }
        }

        mutating func remove(_ subscriber: Int, from topic: Topic) {
            topics[topic]?.remove(subscriber)
            guard topics[topic]?.isEmpty == true else { return }
            topics[topic] = nil
            if case .query(let collection, _) = topic {
                queryTopics[collection]?.remove(topic)
                if queryTopics[collection]?.isEmpty == true { queryTopics[collection] = nil }
            }
        }

        /// Queues `text` (an event of `topic`) to every subscriber of the topic, or to the buffer of those
        /// still being replayed to.
        mutating func deliver(_ text: String, seq: Int64, on topic: Topic) {
            guard let ids = topics[topic] else { return }
            for id in ids {
                let subscription = SubscriptionKey(subscriber: id, topic: topic)
                if replaying[subscription] != nil {
                    replaying[subscription]?.append((seq, text))
                } else if subscribers[id]?.send(text) == true {
                    eventsSent += 1
                }
            }
        }
    }

    /// A request waiting for the events up to `seq` to be published, and the task that ends its wait at its timeout.
    private struct Waiter {
        let seq: Int64
        let continuation: CheckedContinuation<Bool, Never>
        var timer: Task<Void, Never>?

        func resume() {
            timer?.cancel()
            continuation.resume(returning: true)
        }
    }

    private struct SubscriptionKey: Hashable {
        let subscriber: Int
        let topic: Topic
    }

    private let state = Mutex(State())
    let queueLimit: Int

    package init(queueLimit: Int = 10_000, lastPublished: Int64 = 0) {
        self.queueLimit = queueLimit
        state.withLock { $0.lastPublished = lastPublished }
    }

    package func connect(user: String) -> RealtimeSubscriber {
        state.withLock { state in
            state.nextID += 1
            let subscriber = RealtimeSubscriber(id: state.nextID, user: user, queueLimit: queueLimit)
            state.subscribers[subscriber.id] = subscriber
            return subscriber
        }
    }

    func disconnect(_ subscriber: RealtimeSubscriber) {
        state.withLock { state in
            state.subscribers[subscriber.id] = nil
            state.replaying = state.replaying.filter { $0.key.subscriber != subscriber.id }
            for topic in state.topics.keys { state.remove(subscriber.id, from: topic) }
        }
        subscriber.finish()
    }

    /// Subscribes and queues the ack (carrying the last published seq) in one step, so every event
    /// published after the subscription follows the ack.
    package func subscribe(_ subscriber: RealtimeSubscriber, to topic: Topic, ref: Int64) {
        state.withLock { state in
            guard state.subscribers[subscriber.id] != nil else { return }
            state.add(subscriber.id, to: topic)
            subscriber.send(Self.encode(.ack(ref: ref, seq: state.lastPublished)))
        }
    }

    /// Waits until every event up to `seq` has been published, at most `timeout`; returns whether it was.
    ///
    /// For a store whose events reach the hub after their commit (PostgreSQL's event pump reads the log once
    /// `NOTIFY`ed: ``CloudStore/publishesAsItCommits``): a subscription request waits, before its topic is
    /// subscribed, for the events committed when it came (``CloudStore/lastSeq()``). Its ack then carries a seq
    /// at or past every write acknowledged before it, and what it replays or is sent live starts there. Without
    /// the wait, a resumption acked at a head behind an acknowledged write proved continuity up to a seq that
    /// left the write out: the daemon answered the object `fresh` at the version before it; and a stream message
    /// sent while a subscriber was shut out, still in the pump's backlog when its access was given back, reached
    /// it live.
    func published(through seq: Int64, within timeout: Duration) async -> Bool {
        guard state.withLock({ $0.lastPublished < seq }) else { return true }
        return await withCheckedContinuation { continuation in
            let id = state.withLock { state -> Int? in
                guard state.lastPublished < seq else { return nil }
                state.nextWaiter += 1
                state.publicationWaiters[state.nextWaiter] = Waiter(seq: seq, continuation: continuation)
                return state.nextWaiter
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                state.withLock { $0.publicationWaiters.removeValue(forKey: id) }?.continuation.resume(returning: false)
            }
            // Published meanwhile: the timer is not needed (nor kept sleeping for `timeout`).
            let waiting = state.withLock { state -> Bool in
                guard state.publicationWaiters[id] != nil else { return false }
                state.publicationWaiters[id]?.timer = timer
                return true
            }
            if !waiting { timer.cancel() }
        }
    }

    /// Why a subscription is refused: the `error` its request is answered with.
    typealias Refusal = (code: CloudErrorCode, message: String)

    /// Subscribes once `admission` (when given) lets the subscriber in, and resumes after `since` when given:
    /// the topic's events from the log with `since < seq <= head`, then the live ones published meanwhile, with
    /// none missing and none twice. When the log no longer reaches back to `since` (or `since` is ahead of the
    /// log), the ack says `resync` instead.
    ///
    /// The subscription is registered before `admission` reads what it decides by (a stream's ACL), with the
    /// live events buffered until the answer: an ACL change committed before that read is in what it reads, and
    /// one committed after it is published after the registration, so it ends the subscription (the request is
    /// then answered `forbidden`). Read before the registration, a revocation published in between ended
    /// nothing, and the revoked subscriber went on hearing the stream.
    func subscribe(
        _ subscriber: RealtimeSubscriber,
        to topic: Topic,
        ref: Int64,
        since: Int64?,
        from store: any CloudStore,
        admission: (() async -> Refusal?)? = nil
    ) async throws {
        let subscription = SubscriptionKey(subscriber: subscriber.id, topic: topic)
        let registered = state.withLock { state -> Int64? in
            guard state.subscribers[subscriber.id] != nil else { return nil }  // already disconnected
            state.add(subscriber.id, to: topic)
            state.replaying[subscription] = []
            return state.lastPublished
        }
        guard let head = registered else { return }
        if let admission, let refusal = await admission() {
            state.withLock { state in
                state.replaying[subscription] = nil
                state.remove(subscriber.id, from: topic)
            }
            subscriber.send(Self.encode(.error(ref: ref, code: refusal.code, message: refusal.message)))
            return
        }
        let log: (events: [(seq: Int64, event: LoggedEvent)], oldest: Int64?)
        do {
            // Nothing was published after `since`: nothing to replay, and no log to read (a burst of objects
            // just read, each subscribed from its read, costs no query apiece).
            if let since, since != head {
                log = try await store.events(of: topic, after: since, upTo: head)
            } else {
                log = ([], nil)
            }
        } catch {
            state.withLock { state in
                state.replaying[subscription] = nil
                state.remove(subscriber.id, from: topic)
            }
            throw error
        }
        // A stream topic's log holds the recipient's ACL changes too: they are not sent, and one that left
        // this subscriber out since `since` breaks continuity (nothing sent while it was out is replayed).
        let replay = log.events.filter { if case .aclChanged = $0.event { false } else { true } }
        let shutOut = log.events.contains {
            if case .aclChanged(_, _, let acl) = $0.event { !acl.subscribers.contains(subscriber.user) } else { false }
        }
        // Continuity is proven when every event after `since` is still in the log.
        let continuous = since.map { since in since <= head && since + 1 >= (log.oldest ?? head + 1) && !shutOut }
        state.withLock { state in
            let buffered = state.replaying.removeValue(forKey: subscription) ?? []
            guard state.subscribers[subscriber.id] != nil else {
                // Disconnected while the log was read: leave no trace in the topic.
                state.remove(subscriber.id, from: topic)
                return
            }
            guard state.topics[topic]?.contains(subscriber.id) == true else {
                // Ended while the ACL or the log was read (an ACL change): the request is answered with that.
                subscriber.send(Self.encode(.error(ref: ref, code: .forbidden, message: "the subscription was ended: the access list changed")))
                return
            }
            switch continuous {
            case nil: subscriber.send(Self.encode(.ack(ref: ref, seq: head)))
            case true: subscriber.send(Self.encode(.ack(ref: ref, seq: head, replayed: replay.count + buffered.count)))
            case false: subscriber.send(Self.encode(.ack(ref: ref, seq: head, resync: true)))
            }
            if continuous == true {
                for logged in replay where subscriber.send(Self.encode(logged.event.serverMessage(seq: logged.seq, topic: topic))) {
                    state.eventsSent += 1
                }
            }
            for event in buffered where subscriber.send(event.text) { state.eventsSent += 1 }
        }
    }

    package func unsubscribe(_ subscriber: RealtimeSubscriber, from topic: Topic, ack: String) {
        state.withLock { state in
            state.replaying[SubscriptionKey(subscriber: subscriber.id, topic: topic)] = nil
            state.remove(subscriber.id, from: topic)
            subscriber.send(ack)
        }
    }

    /// Publishes a committed write of an object of `collection` nobody listens to, without its event: returns
    /// `true` when no subscriber has its object's topic, its collection's or a query topic of its collection,
    /// and then counts it published (`false`: decode it and ``publish(seq:event:)``). For PostgreSQL's event
    /// pump, which reads every instance's writes from the log: reading and decoding events no one hears took 3.8 % of
    /// the cloud's CPU with 64 writers, 0.6 % without the decoding. Decided under the lock that subscriptions take, as `publish` is: a subscription
    /// made after this call is acked at or past `seq`, so it replays the write from the log if it resumes. A
    /// stream's message or access list (`$`-collections) is never skipped: its topic is in the event.
    package func publishUnheard(seq: Int64, collection: String, id: String) -> Bool {
        guard !collection.hasPrefix("$") else { return false }
        let (unheard, due) = state.withLock { state -> (Bool, [Waiter]) in
            guard state.topics[.object(EntityKey(collection: collection, id: id))] == nil, state.topics[.collection(collection)] == nil,
                state.queryTopics[collection] == nil
            else { return (false, []) }
            return (true, state.published(seq))
        }
        for waiter in due { waiter.resume() }
        return unheard
    }

    /// Publishes a committed event to the subscribers of its topics (a write: the entity's, its
    /// collection's and the query topics it concerns; a stream message: the recipient's). Each message is
    /// encoded once per topic, whatever the number of subscribers.
    func publish(seq: Int64, event: LoggedEvent) {
        if case .aclChanged(let stream, let user, let acl) = event {
            endSubscriptions(to: .stream(stream, user: user), notAllowedBy: acl, seq: seq, event: event)
            return
        }
        // Encoded outside the lock, and only for topics someone subscribes to (most writes' object topic has
        // none); a topic subscribed to in between is encoded under the lock.
        let topics = event.topics
        let heard = state.withLock { state in topics.filter { state.topics[$0] != nil } }
        var encoded: [Topic: String] = [:]
        for topic in heard { encoded[topic] = try? StoreText.encode(event.serverMessage(seq: seq, topic: topic)) }
        let due = state.withLock { state in
            for topic in topics where state.topics[topic] != nil {
                guard let text = encoded[topic] ?? (try? StoreText.encode(event.serverMessage(seq: seq, topic: topic))) else { continue }
                state.deliver(text, seq: seq, on: topic)
            }
            // Query topics are matched here, under the lock that subscriptions take too, so none subscribed
            // before this event's publication misses it.
            if case .entity(let entity, _) = event, let queries = state.queryTopics[entity.collection] {
                for topic in queries where event.concerns(topic) {
                    guard let text = try? StoreText.encode(event.serverMessage(seq: seq, topic: topic)) else { continue }
                    state.deliver(text, seq: seq, on: topic)
                }
            }
            return state.published(seq)
        }
        for waiter in due { waiter.resume() }
    }

    /// Ends the subscriptions to a stream topic whose connections' users the topic's new ACL no longer
    /// lists among its subscribers: each gets an `error` naming the topic (no `ref`: nothing asked), but one whose
    /// request is not answered yet, which is answered `forbidden` instead.
    private func endSubscriptions(to topic: Topic, notAllowedBy acl: StreamACL, seq: Int64, event: LoggedEvent) {
        let text = Self.encode(event.serverMessage(seq: seq, topic: topic))
        let due = state.withLock { state in
            for id in state.topics[topic] ?? [] {
                guard let subscriber = state.subscribers[id], !acl.subscribers.contains(subscriber.user) else { continue }
                // One not answered yet (its ACL or log being read) is told by its request's answer, `forbidden`.
                let answered = state.replaying.removeValue(forKey: SubscriptionKey(subscriber: id, topic: topic)) == nil
                state.remove(id, from: topic)
                if answered { subscriber.send(text) }
            }
            return state.published(seq)
        }
        for waiter in due { waiter.resume() }
    }

    static func encode(_ message: RealtimeServerMessage) -> String {
        (try? StoreText.encode(message)) ?? "{}"
    }

    /// Closes every realtime connection (fault injection).
    func dropAll() {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) { subscriber.close(.faultInjection) }
    }

    func recordFetch(_ key: EntityKey) { recordFetches([key]) }

    /// Counts one request that reads `keys`, and a read of each.
    func recordFetches(_ keys: [EntityKey]) {
        state.withLock { state in
            state.readRequests += 1
            for key in keys { state.fetches[key.description, default: 0] += 1 }
        }
    }

    /// Counts a realtime message received from a client.
    func recordRealtimeMessage() {
        state.withLock { $0.realtimeMessages += 1 }
    }

    /// Counts a query page read, under `query:<canonical query>`.
    func recordQuery(_ query: CollectionQuery) {
        state.withLock { $0.fetches["query:" + query.canonicalText, default: 0] += 1 }
    }

    func stats() -> CloudStats {
        state.withLock { state in
            CloudStats(
                connections: state.subscribers.count,
                subscriptions: state.topics.mapValues(\.count).reduce(into: [:]) { $0[$1.key.description] = $1.value },
                fetches: state.fetches,
                eventsSent: state.eventsSent,
                logins: 0,
                refreshes: 0,
                readRequests: state.readRequests,
                realtimeMessages: state.realtimeMessages
            )
        }
    }
}
