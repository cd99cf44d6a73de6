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

/// The one realtime WebSocket to the cloud: ref-counted topic subscriptions, reconnect with backoff.
package actor RealtimeConnection {
    /// The connection's phase, its backoff and each subscribed topic's references and how far it was heard (where
    /// a resubscription resumes from, and the last event handed to the engine).
    var machine = RealtimeConnectionStateMachine()
    /// The requests, their answers, the resumptions and replays under way (``RealtimeProtocol``).
    var wire = RealtimeProtocol()
    var writer: WebSocketOutboundWriter?
    /// Whether a batch is being written (``writeOutgoing()``).
    var writing = false
    /// The callers waiting for answers, by request ref: their wait, and the request's place in it.
    var answerWaits: [Int64: (group: AnswerGroup, index: Int)] = [:]
    /// Topics whose first acquirer's subscription awaits the cloud's answer, with the later acquirers waiting
    /// for it: one told "subscribed" before the subscription took effect would fetch, and miss the events
    /// between its read and the subscription's baseline.
    var subscribing: [Topic: [CheckedContinuation<Void, Never>]] = [:]
    /// The topics that stay subscribed for a moment after their last holder left (``Lingering``).
    var lingering: Lingering
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
    let logger: Logger
    /// What the connection tells the engine, in order, taken a batch at a time.
    nonisolated let events = BatchQueue<RealtimeEvent>()

    init(
        cloudURL: String,
        session: Session,
        cloudConnections: CloudConnections,
        logger: Logger,
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
    }

    var status: ConnectionStatus { machine.status }

    /// The last event sequence number seen on `topic` (or its subscription's baseline).
    package func lastSeq(of topic: Topic) -> Int64? { machine.heard(topic)?.seq }

    /// The sequence number of the last event on `topic` handed to the engine, if one was since the topic was
    /// subscribed: the engine compares it with the last one it applied to know whether events are still on
    /// their way to it. Until the engine has applied that one, ``lastSeq(of:)`` is ahead of what it holds.
    func lastEventSeq(of topic: Topic) -> Int64? { machine.heard(topic)?.eventSeq }

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
        if message.op == .error {
            logger.warning(
                "the cloud refused a realtime request",
                metadata: ["code": "\(message.code?.rawValue ?? "-")", "message": "\(message.message ?? "")"]
            )
        }
        perform(wire.received(message, topics: &machine))
    }

    /// Performs what the protocol asks for: the engine told, waiting callers answered, the next batch written.
    func perform(_ actions: [RealtimeProtocol.Action]) {
        for action in actions {
            switch action {
            case .emit(let event):
                events.yield(event)
            case .answer(let ref, let answer):
                if let (group, index) = answerWaits.removeValueShrinking(forKey: ref) { group.answer(index, answer) }
            case .writeNext:
                Task { await self.writeOutgoing() }
            }
        }
    }

    private func disconnected() {
        writer = nil
        perform(wire.connectionLost())
    }
}
