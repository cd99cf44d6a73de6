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

/// What the realtime connection tells the engine.
enum RealtimeEvent: Sendable {
    /// The WebSocket is open and every wanted topic has been (re)subscribed, resuming from the last event
    /// seen where the cloud could replay what was missed. The objects of `needRefresh` could not be resumed
    /// (never had a baseline, the cloud said resync, or refused them) and must be fetched again. Those of
    /// `refused` were refused: a ``subscriptionRefused(_:code:message:)`` told of each before; their feeds and
    /// streams got that error instead of a resync notice.
    case connected(needRefresh: Set<Topic>, refused: Set<Topic>)
    case statusChanged(ConnectionStatus)
    /// An entity changed on a subscribed topic (a write is published on its object topic and on its
    /// collection's topic: subscribed to both, the engine hears it twice).
    /// `previous`: the object's data before the write (`nil` when it did not exist).
    case entityChanged(seq: Int64, topic: Topic, entity: Entity, previous: JSONValue?)
    /// A message arrived on a subscribed stream topic.
    case streamMessage(seq: Int64, topic: Topic, message: StreamMessage)
    /// The cloud refused to subscribe the topic (when it was subscribed on connect, not by ``RealtimeConnection/acquire(_:)``,
    /// which returns the refusal itself).
    case subscriptionRefused(Topic, code: CloudErrorCode?, message: String)
    /// A resumed subscription's replay is over: the engine has every event of the topic up to the resume's
    /// acknowledgement (follows the last replayed event).
    case caughtUp(Topic)
}

/// The one realtime WebSocket to the cloud: ref-counted topic subscriptions, reconnect with backoff.
package actor RealtimeConnection {
    /// The connection's phase, its backoff and each subscribed topic's references and how far it was heard (where
    /// a resubscription resumes from, and the last event handed to the engine).
    private var machine = RealtimeConnectionStateMachine()
    private var writer: WebSocketOutboundWriter?
    /// The requests sent and their answers (``RealtimeRequests``).
    private var requestBook = RealtimeRequests()
    /// Subscriptions under way: resuming, awaiting their answer, replaying (``SubscriptionProgress``).
    private var progress = SubscriptionProgress()
    /// The topics that stay subscribed for a moment after their last holder left (``Lingering``).
    private var lingering: Lingering
    /// How often the connection pings the cloud; a ping unanswered by the next one ends the connection
    /// (``LiveSDKConfiguration/realtimePingInterval``).
    private let pingInterval: Duration
    /// Whether the cloud closed the last connection with a close frame (rather than it being reset, or given
    /// up for an unanswered ping): what the log says when it ends.
    private var closedByCloud = false
    private let url: String
    private let engineLoop: EngineLoop
    package nonisolated var unownedExecutor: UnownedSerialExecutor { engineLoop.serialExecutor }
    private let session: Session
    /// The engine's HTTP connections to the same cloud: renewed when this connection finds the cloud silent.
    private let cloudConnections: CloudConnections
    private let logger: Logger
    private let events: BatchQueue<RealtimeEvent>

    init(
        cloudURL: String,
        session: Session,
        cloudConnections: CloudConnections,
        logger: Logger,
        events: BatchQueue<RealtimeEvent>,
        linger: Duration = .seconds(2),
        pingInterval: Duration = LiveSDKConfiguration.defaultRealtimePingInterval,
        engineLoop: EngineLoop = EngineLoop(group: MultiThreadedEventLoopGroup.singleton)
    ) {
        self.lingering = Lingering(topics: TopicLingers(duration: linger))
        self.pingInterval = pingInterval
        self.engineLoop = engineLoop
        var base = cloudURL.hasSuffix("/") ? String(cloudURL.dropLast()) : cloudURL
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        self.url = base + CloudPath.realtime
        self.session = session
        self.cloudConnections = cloudConnections
        self.logger = logger
        self.events = events
    }

    var status: ConnectionStatus { machine.status }

    /// The last event sequence number seen on `topic` (or its subscription's baseline).
    package func lastSeq(of topic: Topic) -> Int64? { machine.heard(topic)?.seq }

    /// The sequence number of the last event on `topic` handed to the engine, if one was since the topic was
    /// subscribed: the engine compares it with the last one it applied to know whether events are still on
    /// their way to it. Until the engine has applied that one, ``lastSeq(of:)`` is ahead of what it holds.
    func lastEventSeq(of topic: Topic) -> Int64? { machine.heard(topic)?.eventSeq }

    /// Takes a reference on `topic`; returns once the cloud answered the subscription, or at once when
    /// the connection is down or the topic was subscribed already (it is then subscribed on connect, and a
    /// ``RealtimeEvent/connected`` follows).
    /// - Returns: the cloud's `error` answer when it refused the subscription (then no reference is held).
    @discardableResult
    func acquire(_ topic: Topic) async -> RealtimeServerMessage? {
        let outcome = await acquire(topic, since: nil)
        if case .refused(let answer) = outcome { return answer }
        return nil
    }

    enum AcquireOutcome: Sendable {
        /// Subscribed now, or (not connected, or already subscribed) on its way: fetch to have the state.
        case subscribed
        /// Resumed from `since` with continuity proven: the missed events follow, then ``RealtimeEvent/caughtUp(_:)``.
        case resumed
        /// The cloud refused: no reference is held.
        case refused(RealtimeServerMessage)
    }

    /// Takes a reference on `topic`, resuming from `since` (a checkpoint the engine's cache holds) when it
    /// is the first: the cloud replays what came after it, and no fetch is needed.
    func acquire(_ topic: Topic, since: Int64?) async -> AcquireOutcome {
        await acquire([(topic, since)])[0]
    }

    /// ``acquire(_:since:)`` for many topics from one task: the subscriptions the first references need go out
    /// together (in batches, as any) and one wait takes every answer. A burst of observations activated at once
    /// (thousands told a cached copy, each resuming its topic from its checkpoint) thus costs one task, not one
    /// each, with its frames held until the cloud answers. Returns the outcomes in the order of `requests`.
    func acquire(_ requests: [(topic: Topic, since: Int64?)]) async -> [AcquireOutcome] {
        var outcomes = [AcquireOutcome](repeating: .subscribed, count: requests.count)
        var subscriptions: [(index: Int, topic: Topic, from: Int64?)] = []
        // Topics whose first acquirer's subscription is still unanswered: told "subscribed" once it is answered.
        var awaitingOthers: [Topic] = []
        for (index, (topic, since)) in requests.enumerated() {
            let first = !machine.wants(topic)
            let subscribeNow = machine.acquire(topic)
            if first, let since { machine.heard(since, of: topic) }
            if subscribeNow {
                // Listed at once: a later request for the same topic in `requests` waits for this answer too.
                progress.subscribing[topic] = []
                subscriptions.append((index, topic, since.flatMap { _ in machine.heard(topic)?.seq }))
            } else if progress.subscribing[topic] != nil {
                awaitingOthers.append(topic)
            }
        }
        let answers = await sendAll(subscriptions.map { (.subscribe, $0.topic, $0.from) })
        for (subscription, answer) in zip(subscriptions, answers) {
            for waiter in progress.subscribing.removeValueShrinking(forKey: subscription.topic) ?? [] { waiter.resume() }
            switch took(answer, of: subscription.topic, resumingFrom: subscription.from) {
            case .noAnswer, .notResumed: outcomes[subscription.index] = .subscribed
            case .resumed: outcomes[subscription.index] = .resumed
            case .refused(let answer): outcomes[subscription.index] = .refused(answer)
            }
        }
        for topic in awaitingOthers {
            // Checked in the body: the call may suspend before running it, and the answer may come meanwhile.
            await withCheckedContinuation { waiter in
                if progress.subscribing[topic] != nil { progress.subscribing[topic]?.append(waiter) } else { waiter.resume() }
            }
        }
        return outcomes
    }

    private enum SubscribeAnswer {
        /// The link went down first: the topic is subscribed on connect.
        case noAnswer
        case resumed
        /// Subscribed from the cloud's head (no resumption asked for, or continuity not proven).
        case notResumed
        case refused(RealtimeServerMessage)
    }

    /// Sends the `subscribe` of a topic just acquired first (resuming from `resumeFrom`), holding later acquirers
    /// until the cloud answers, and takes in the answer.
    private func subscribe(_ topic: Topic, from resumeFrom: Int64?) async -> SubscribeAnswer {
        progress.subscribing[topic] = []
        let answer = await sendAll([(.subscribe, topic, resumeFrom)])[0]
        for waiter in progress.subscribing.removeValueShrinking(forKey: topic) ?? [] { waiter.resume() }
        return took(answer, of: topic, resumingFrom: resumeFrom)
    }

    /// Takes in the answer to the `subscribe` of a topic just acquired first (resuming from `resumeFrom`).
    private func took(_ answer: RealtimeServerMessage?, of topic: Topic, resumingFrom resumeFrom: Int64?) -> SubscribeAnswer {
        guard let answer else { return .noAnswer }
        if answer.op == .error {
            machine.abandon(topic)
            machine.forgetHeard(topic)
            return .refused(answer)
        }
        if let seq = answer.seq {
            if resumeFrom != nil && answer.resync != true && answer.replayed != nil { return .resumed }
            machine.heard(seq, of: topic)
        }
        return .notResumed
    }

    /// Those of `topics` that are held or linger (subscribed, or to be subscribed on connect).
    func held(_ topics: [Topic]) -> Set<Topic> { Set(topics.lazy.filter { self.machine.wants($0) }) }

    /// What ``acquire(_:readAsOf:)`` did.
    enum ReadSubscription: Sendable {
        /// Subscribed from the read: every event after it follows (the missed ones replayed), then
        /// ``RealtimeEvent/caughtUp(_:)``.
        case resumed
        /// The link is down: the topic is subscribed on connect, resuming from the read, and named in
        /// ``RealtimeEvent/connected(needRefresh:refused:)`` if the cloud cannot resume it.
        case deferred
        /// Subscribed, but the cloud could not resume from the read (or the topic was held already): what
        /// changed since the read may be missed, so read it again.
        case readAgain
        /// The cloud refused: no reference is held.
        case refused(RealtimeServerMessage)
    }

    /// Takes the first reference on `topic` for an object just read as of event `seq` (the cloud's batched read
    /// says which): its subscription resumes from the read, so the cloud replays what changed since, and the
    /// read needed no subscription before it (a burst of new observations is read in large batches at once,
    /// rather than each after its own subscription's answer).
    func acquire(_ topic: Topic, readAsOf seq: Int64) async -> ReadSubscription {
        guard !machine.wants(topic) else {
            if case .refused(let answer) = await acquire(topic, since: nil) { return .refused(answer) }
            return .readAgain
        }
        let subscribeNow = machine.acquire(topic)
        machine.heard(seq, of: topic)
        guard subscribeNow else { return .deferred }
        switch await subscribe(topic, from: seq) {
        case .noAnswer: return .deferred  // the link went down: resubscribed on connect, from `seq`
        case .resumed: return .resumed
        case .notResumed: return .readAgain
        case .refused(let answer): return .refused(answer)
        }
    }

    /// Reads of `topics` made as of event `seq` while their subscriptions had no baseline (the link was down or
    /// still connecting): each subscription made when the link is up resumes from its topic's first such read,
    /// so the cloud replays what changed after it (with continuity proven) instead of the engine fetching again
    /// after a resync notice. A topic with a baseline already, or no longer held, is left as it is.
    func read(_ topics: [Topic], asOf seq: Int64) {
        for topic in topics { machine.heardFirst(seq, of: topic) }
    }

    /// Drops a reference on `topic`. When it was the last, the topic lingers for a moment, still subscribed:
    /// a holder coming back meanwhile (a page move, an observer re-observing) takes it over with no gap.
    func release(_ topic: Topic) {
        guard machine.release(topic) == .linger else { return }
        lingering.topics.linger(topic, at: .now)
        guard !lingering.running else { return }
        lingering.running = true
        Task { await self.endLingers() }
    }

    /// Ends the lingers as they come due, the oldest first, until none is left: the topics no holder took back
    /// meanwhile are dropped, and their unsubscriptions go out together (nobody waits for their answers).
    private func endLingers() async {
        defer { lingering.running = false }
        while let deadline = lingering.topics.nextDeadline {
            try? await Task.sleep(until: deadline, clock: .continuous)
            var unsubscribing = false
            for topic in lingering.topics.expired(at: .now) {
                let outcome = machine.expire(topic)
                guard outcome.dropped else { continue }  // held again (what was heard of a dropped one went with it)
                progress.replayRemaining.removeValueShrinking(forKey: topic)
                if outcome.unsubscribe, writer != nil {
                    requestBook.unawaited.insert(queue(.unsubscribe, topic))
                    unsubscribing = true
                }
            }
            if unsubscribing { await writeOutgoing() }
        }
    }

    /// Connects and reconnects until the task is cancelled.
    func run() async {
        while !Task.isCancelled {
            machine.connectionStarted()
            events.yield(.statusChanged(machine.status))
            do {
                let token = try await session.accessToken()
                closedByCloud = false
                try await connectOnce(token: token)
                if Task.isCancelled { break }
                if closedByCloud {
                    logger.info("realtime connection closed by the cloud")
                } else {
                    // Reset, or given up because the cloud answered no ping: silent without closing (a network
                    // partition, a host gone, a hung process). Whatever was sent meanwhile is resumed from; the
                    // HTTP connections that went silent with it are not taken again.
                    logger.warning(
                        "realtime connection lost without the cloud closing it (reset, or no answer to a ping within \(pingInterval)); reconnecting"
                    )
                    cloudConnections.renew()
                }
            } catch is CancellationError {
                break
            } catch {
                logger.warning("realtime connection failed", metadata: ["error": "\(error)"])
                // A handshake the cloud never answered: the HTTP connections made meanwhile are as silent.
                if error is RealtimeHandshakeTimeout { cloudConnections.renew() }
            }
            disconnected()
            let delay = machine.connectionLost(jitter: Double.random(in: 0..<1))
            events.yield(.statusChanged(machine.status))
            do {
                try await Task.sleep(for: delay)
            } catch {
                break
            }
        }
        disconnected()
        events.yield(.statusChanged(.offline))
    }

    /// One connection, until it ends, bounded while it is being made: the WebSocket client's handshake can
    /// wait forever and does not end on cancellation (the cloud dying between accepting the connection and
    /// answering the upgrade leaves the channel half-closed, and NIO's client upgrade handler fails its
    /// promise only when the channel closes). So the attempt runs in a task of its own, and is given up
    /// (left to end whenever it does, holding one half-closed socket) when the handshake has not completed
    /// within ``handshakeTimeout`` or the engine stops meanwhile. Once connected, it ends on cancellation.
    private func connectOnce(token: String) async throws {
        let handshake = HandshakeGuard()
        // On the engine's loop: the reader's `next()` (nonisolated) would otherwise run on the cooperative pool
        // and hop to the loop and back for every message (two thread switches and a wakeup of the loop each).
        let attempt = Task(executorPreference: engineLoop.taskExecutor) {
            try await self.connect(token: token, handshake: handshake)
        }
        let timeout = Self.handshakeTimeout
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                handshake.waiting(continuation)
                // Off the engine's executor: neither touches the actor, and either may outlive the engine's
                // event loop (the attempt forever, the timer by its timeout).
                Task.detached {
                    do {
                        try await attempt.value
                        handshake.finish(.success(()))
                    } catch {
                        handshake.finish(.failure(error))
                    }
                }
                Task.detached {
                    try? await Task.sleep(for: timeout)
                    handshake.giveUpIfNotConnected(RealtimeHandshakeTimeout(timeout: timeout))
                }
            }
        } onCancel: {
            attempt.cancel()
            handshake.giveUpIfNotConnected(CancellationError())
        }
    }

    /// How long the WebSocket handshake may take.
    static let handshakeTimeout: Duration = .seconds(10)

    private func connect(token: String, handshake: HandshakeGuard) async throws {
        // Pinged: a connection the cloud stopped answering without closing it is given up when a ping goes
        // unanswered until the next, rather than held as connected while nothing comes (events lost unseen).
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 24, autoPing: .enabled(timePeriod: pingInterval))
        configuration.additionalHeaders[.authorization] = "Bearer \(token)"
        let loop = engineLoop.eventLoop
        let closeFrame = try await WebSocketClient.connect(url: url, configuration: configuration, eventLoopGroup: loop, logger: logger) {
            inbound,
            outbound,
            _ in
            // Given up meanwhile (too slow, or the engine stopping): a newer attempt may be connecting.
            guard handshake.connected() else { return }
            enum Part { case reader, closer, setup }
            try await withThrowingTaskGroup(of: Part.self) { group in
                // The reader runs first: subscription acks (awaited by the setup below) arrive through it.
                group.addTask {
                    do {
                        var iterator = inbound.messages(maxSize: 1 << 24).makeAsyncIterator()
                        while let message = try await iterator.next() {
                            guard case .text(let text) = message else { continue }
                            if loop.inEventLoop {
                                // On the actor's own thread (its executor is the loop): no hop, so the messages
                                // buffered are all read before the engine runs, and reach it as one batch.
                                self.receivedOnLoop(text)
                            } else {
                                await self.received(text)
                            }
                        }
                    } catch {
                        await self.disconnected()
                        throw error
                    }
                    await self.disconnected()
                    return .reader
                }
                group.addTask {
                    // The WebSocket client does not end on cancellation by itself: wait for it, then close.
                    let (never, keepOpen) = AsyncStream.makeStream(of: Void.self)
                    for await _ in never {}
                    keepOpen.finish()
                    try? await outbound.close(.goingAway, reason: "client shutting down")
                    return .closer
                }
                group.addTask {
                    await self.established(writer: outbound)
                    return .setup
                }
                while let part = try await group.next() {
                    if part != .setup { break }
                }
                group.cancelAll()
            }
        }
        closedByCloud = closeFrame != nil
    }

    private func established(writer: WebSocketOutboundWriter) async {
        self.writer = writer
        let topics = machine.connectionEstablished()
        logger.debug("realtime connection established", metadata: ["topics": "\(topics.count)"])
        events.yield(.statusChanged(machine.status))
        var needRefresh: Set<Topic> = []
        var refused: Set<Topic> = []
        var resumed = 0
        // All at once: the requests go out batched, and one wait takes their answers.
        let requests = topics.map { (topic: $0, since: machine.heard($0)?.seq) }
        let answers = await sendAll(requests.map { (.subscribe, $0.topic, $0.since) })
        for ((topic, since), ack) in zip(requests, answers) {
            if let ack, ack.op == .ack, let seq = ack.seq {
                if since != nil && ack.resync != true {
                    resumed += 1
                } else {
                    needRefresh.insert(topic)
                    machine.heard(seq, of: topic)
                }
            } else {
                if let ack, ack.op == .error {
                    refused.insert(topic)
                    events.yield(.subscriptionRefused(topic, code: ack.code, message: ack.message ?? "refused"))
                }
                needRefresh.insert(topic)
            }
        }
        if !topics.isEmpty {
            logger.debug("resubscribed", metadata: ["resumed": "\(resumed)", "refetch": "\(needRefresh.count)"])
        }
        events.yield(.connected(needRefresh: needRefresh, refused: refused))
    }

    /// ``received(_:)`` from a task running on the engine's loop, which is this actor's executor: no hop.
    private nonisolated func receivedOnLoop(_ text: String) {
        assumeIsolated { $0.received(text) }
    }

    private func received(_ text: String) {
        let message: RealtimeServerMessage
        do {
            // The parser first (one message per event: Foundation's decoder paid a thrown error for every kind a
            // `JSONValue` tried before its own); Foundation's for anything it refuses (an integer beyond 2^53),
            // but for nesting too deep (``CloudJSON``).
            message = try CloudJSON.decodeRealtimeMessage(from: text)
        } catch {
            logger.warning("ignoring a realtime message that could not be decoded", metadata: ["error": "\(error)"])
            return
        }
        switch message.op {
        case .ack:
            guard let ref = message.ref else { return }
            if let topic = progress.resuming.removeValueShrinking(forKey: ref), message.resync != true, let replayed = message.replayed {
                // The replay follows this ack; the topic is caught up after it (at once when empty).
                if replayed == 0 {
                    events.yield(.caughtUp(topic))
                } else {
                    progress.replayRemaining[topic] = replayed
                }
            }
            answered(ref, message)
        case .error:
            logger.warning(
                "the cloud refused a realtime request",
                metadata: ["code": "\(message.code?.rawValue ?? "-")", "message": "\(message.message ?? "")"]
            )
            if let ref = message.ref {
                answered(ref, message)
            } else if let topic = message.topic {
                // The cloud ended a subscription it no longer allows (a stream ACL changed). Whoever
                // subscribes again starts afresh: nothing sent meanwhile is replayed.
                machine.subscriptionEnded(topic)
                machine.forgetHeard(topic)
                events.yield(.subscriptionRefused(topic, code: message.code, message: message.message ?? "subscription ended"))
            }
        case .event:
            guard let seq = message.seq, let topic = message.topic else { return }
            machine.heardEvent(seq, of: topic)
            if let entity = message.entity {
                events.yield(.entityChanged(seq: seq, topic: topic, entity: entity, previous: message.previous))
            } else if let streamMessage = message.streamMessage {
                events.yield(.streamMessage(seq: seq, topic: topic, message: streamMessage))
            }
            if let remaining = progress.replayRemaining[topic] {
                if remaining <= 1 {
                    progress.replayRemaining.removeValueShrinking(forKey: topic)
                    events.yield(.caughtUp(topic))
                } else {
                    progress.replayRemaining[topic] = remaining - 1
                }
            }
        }
    }

    /// Sends requests and waits for their answers (an ack or an error each), in the order of `requests`: `nil`
    /// for a request not sent, or sent on a connection that went down. One wait takes every answer, so a burst
    /// of subscriptions made from one task (``acquire(_:)``) costs that task's frames once.
    ///
    /// Requests are batched (see ``writeOutgoing()``): one made while a batch awaits its answer goes in the next,
    /// with every request made meanwhile, as one `batch` message. A burst of subscriptions (new observations, a
    /// reconnection's resubscriptions) costs a message per batch, not one per topic; a request alone goes out
    /// at once.
    private func sendAll(
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
    private func queue(_ op: RealtimeClientMessage.Operation, _ topic: Topic, since: Int64? = nil) -> Int64 {
        requestBook.nextRef += 1
        requestBook.outgoing.append(RealtimeClientMessage(op: op, ref: requestBook.nextRef, topic: topic, since: since))
        return requestBook.nextRef
    }

    /// Writes the queued requests, a batch per message: one batch at a time, the next once the cloud has
    /// answered the last request of the one before (requests made meanwhile go in the next). A write that
    /// fails leaves its requests unanswered: their senders get `nil`, as the connection goes down.
    private func writeOutgoing() async {
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

    private func answered(_ ref: Int64, _ answer: RealtimeServerMessage) {
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

    private func disconnected() {
        writer = nil
        requestBook.generation += 1
        requestBook.awaitedRef = nil
        requestBook.unsent.removeAll()
        requestBook.unawaited.removeAll()
        requestBook.outgoing.removeAll()
        progress.resuming.removeAll()
        progress.replayRemaining.removeAll()
        requestBook.earlyAnswers.removeAll()
        let grouped = requestBook.groupedAcks
        requestBook.groupedAcks.removeAll()
        for (group, index) in grouped.values { group.answer(index, nil) }
    }
}
