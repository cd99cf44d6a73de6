// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
import LiveGateProtocol
import LiveGateSystemd
import LiveJSON
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One client connection: reads frames, answers requests in order, and owns the connection's tokens.
/// Closing the connection (by either side) releases every token it had.
final class ClientConnection: Sendable {
    let id: UInt64
    let outbox: ConnectionOutbox
    /// The prefixes of this connection's `object.changed` notifications, a block of tokens at a time.
    let objectChangedPrefixes = TokenPrefixes(method: NotificationMethod.objectChanged)
    let context: DaemonContext
    let logger: Logger
    /// The event loop this connection's channel runs on.
    let eventLoop: any EventLoop
    /// The frame limit this connection started with.
    let maxFrameBytes: Int
    private let tokens = Mutex(TokenTable())
    private let requests = Mutex(RequestState())
    /// What the access policy allows this peer; decided when the connection starts.
    private let access = Mutex(AccessPolicy.Decision.readWrite)
    /// The request rate, when the configuration sets one (none by default: connections are served in turns).
    private let rate: Mutex<RequestRate>?
    /// Live tokens at most (from the limits this connection started with).
    let maxTokens: Int

    /// Whether a request is being performed, and whether the daemon asked to close after it.
    struct RequestState {
        var inFlight = false
        /// Set by ``shutdown(final:)`` while a request runs: the connection closes once it has answered.
        var closeAfterCurrent: ByteBuffer??
    }

    struct TokenTable {
        var next: Int64 = 0
        var live: [Int64: TokenSubscription] = [:]
        /// Tokens allocated whose subscription is being set up.
        var pending: Set<Int64> = []
        /// Pending tokens that ended (once fired, or invalidated) before their setup finished.
        var endedWhilePending: Set<Int64> = []
    }

    /// Who is at the other end (`SO_PEERCRED`, `SO_PEERGROUPS`), when the kernel said.
    let peer: PeerCredentials?
    /// The client's name from its `hello`, for `daemon.clients`.
    private let clientName = Mutex<String?>(nil)
    /// When the connection was accepted.
    let connectedAt = ContinuousClock.now

    init(id: UInt64, context: DaemonContext, eventLoop: any EventLoop, peer: PeerCredentials?, logger: Logger) {
        self.id = id
        self.peer = peer
        self.context = context
        self.eventLoop = eventLoop
        let limits = context.settings.limits
        self.maxFrameBytes = limits.maxFrameBytes
        self.maxTokens = limits.maxTokensPerConnection
        self.rate = limits.maxRequestsPerSecond > 0 ? Mutex(RequestRate(perSecond: limits.maxRequestsPerSecond)) : nil
        self.outbox = ConnectionOutbox(
            maxQueuedBytes: limits.maxQueuedBytesPerConnection,
            maxStall: limits.maxStall,
            eventLoop: eventLoop,
            chunkPool: context.flushers.of(eventLoop).chunks
        )
        var logger = logger
        logger[metadataKey: "conn"] = "\(id)"
        // Every entry about this client (requests included) carries its identity: LIVEGATE_CLIENT_PID/UID/GID.
        if let peer {
            logger[metadataKey: "client_pid"] = "\(peer.pid)"
            logger[metadataKey: "client_uid"] = "\(peer.uid)"
            logger[metadataKey: "client_gid"] = "\(peer.gid)"
        }
        self.logger = logger
    }

    /// The client's name, once it said `hello`.
    var name: String? {
        get { clientName.withLock { $0 } }
        set { clientName.withLock { $0 = newValue } }
    }

    /// Serves the connection until the peer closes it, it is cut off, or the daemon shuts down.
    func run(_ channel: NIOAsyncChannel<InboundFrame, ByteBuffer>) async {
        let logger = self.logger
        let refusal = admit(peer)
        if let refusal {
            logger.warning(
                "client refused",
                metadata: [LogField.messageID: .string(LogMessageID.clientRefused), "reason": "\(refusal.message)"]
            )
            outbox.close(final: try? NotificationFrame.standalone(method: NotificationMethod.connectionClosing, params: refusal))
        } else {
            logger.info("client connected")
        }
        // A client cut off for reading too slowly may never read again: its socket is closed after a grace
        // period that lets the closing notification through to a client that still reads, however slowly.
        let underlying = channel.channel
        outbox.whenCutOff {
            underlying.eventLoop.scheduleTask(in: .seconds(2)) { underlying.close(promise: nil) }
        }
        do {
            let writer = try await channel.channel.pipeline.handler(type: OutboxWriter.self).get()
            let written = writer.start(outbox, channel: channel.channel)
            try await channel.executeThenClose { inbound, _ in
                // One request at a time, and a turn of `requestsPerTurn` at most before the connections with
                // requests waiting run theirs: a burst is served at full speed when nobody else waits, and
                // gets its share when others do.
                var servedThisTurn = 0
                for try await frame in inbound where refusal == nil {
                    guard self.beginRequest() else { break }
                    await self.handle(frame)
                    if self.endRequest() { break }
                    servedThisTurn += 1
                    if servedThisTurn == ConnectionLimits.requestsPerTurn {
                        servedThisTurn = 0
                        await Task.yield()
                    }
                }
                logger.debug("client connection: reading ended")
                // The writer ends the connection once what is queued (and the goodbye, if any) is written.
                self.outbox.close()
                try await written.get()
                logger.debug("client connection: written out")
            }
        } catch {
            logger.debug("client connection ended with an error", metadata: ["error": "\(error)"])
        }
        releaseAllTokens()
        context.sessionWatch.unwatch(id)
        if outbox.wasCutOff {
            logger.warning(
                "client cut off: it read too slowly",
                metadata: [LogField.messageID: .string(LogMessageID.clientCutOff), "coalesced": "\(outbox.coalescedCount)"]
            )
        }
        logger.info("client disconnected")
    }

    /// Judges the peer by the access policy and the connection limit; the reason when it is refused.
    private func admit(_ peer: PeerCredentials?) -> ConnectionClosingParams? {
        let settings = context.settings
        let decision: AccessPolicy.Decision
        if let peer {
            decision = settings.policy.decide(peer)
        } else {
            let policy = settings.policy
            decision = policy.allowedUsers.isEmpty && policy.allowedGroups.isEmpty ? .readWrite : .refused("the peer's credentials are unknown")
        }
        access.withLock { $0 = decision }
        if case .refused(let reason) = decision {
            return ConnectionClosingParams(code: .notPermitted, message: "not permitted: \(reason); ask the administrator to change the policy")
        }
        let limit = settings.limits.maxConnections
        if context.connections.count > limit {
            return ConnectionClosingParams(code: .limitExceeded, message: "the daemon serves at most \(limit) connections; try again later")
        }
        return nil
    }

    /// Whether the peer may only read (observe), by the access policy.
    var isReadOnly: Bool { access.withLock { $0 == .readOnly } }

    /// Whether the peer may use the administrative methods (judged by the policy in force now).
    var mayAdminister: Bool {
        guard let peer else { return false }
        return context.settings.policy.mayAdminister(peer, daemonUID: getuid())
    }

    /// What `daemon.clients` says of this connection.
    var info: ClientInfo {
        ClientInfo(
            connection: id,
            pid: peer?.pid,
            uid: peer?.uid,
            gid: peer?.gid,
            client: name,
            access: isReadOnly ? "readOnly" : "readWrite",
            tokens: tokenCount,
            queuedBytes: outbox.queuedBytes,
            coalesced: outbox.coalescedCount,
            cutOff: outbox.wasCutOff,
            connectedSeconds: Int((ContinuousClock.now - connectedAt).components.seconds)
        )
    }

    /// Takes one request from the rate budget; `false` when the configuration sets a rate and the client
    /// sends faster.
    func admitRequest() -> Bool {
        rate?.withLock { $0.admit(now: .now) } ?? true
    }

    var requestsPerSecond: Int { rate?.withLock { $0.perSecond } ?? 0 }

    /// Asks the connection to end: no new request is read; one being performed finishes and is answered;
    /// then `final` is written and the connection closes. So every write a client sent is either performed
    /// and answered, or not performed at all.
    func shutdown(final: ByteBuffer?) {
        let closeNow = requests.withLock { state -> Bool in
            if state.inFlight {
                state.closeAfterCurrent = .some(final)
                return false
            }
            state.closeAfterCurrent = .some(final)
            return true
        }
        if closeNow { outbox.close(final: final) }
    }

    /// Marks a request as started; `false` when the connection is closing and must read no more.
    private func beginRequest() -> Bool {
        requests.withLock { state in
            guard state.closeAfterCurrent == nil else { return false }
            state.inFlight = true
            return true
        }
    }

    /// Marks the request as answered; closes the connection and returns `true` when shutdown was asked meanwhile.
    private func endRequest() -> Bool {
        let final = requests.withLock { state -> ByteBuffer?? in
            state.inFlight = false
            return state.closeAfterCurrent
        }
        guard let final else { return false }
        outbox.close(final: final)
        return true
    }

    // MARK: Tokens

    func allocateToken() -> Int64 {
        tokens.withLock { table in
            table.next += 1
            table.pending.insert(table.next)
            return table.next
        }
    }

    /// Records the subscription of a token allocated by ``allocateToken()``; when the token already ended,
    /// the subscription is released instead.
    func tokenSubscribed(_ token: Int64, _ subscription: TokenSubscription) {
        let endedEarly = tokens.withLock { table -> Bool in
            table.pending.remove(token)
            if table.endedWhilePending.remove(token) != nil { return true }
            table.live[token] = subscription
            return false
        }
        if endedEarly { subscription.end(context) }
    }

    /// Ends a token; returns `false` when this connection has no such token.
    @discardableResult
    func endToken(_ token: Int64) -> Bool {
        let outcome = tokens.withLock { table -> (Bool, TokenSubscription?) in
            if let subscription = table.live.removeValue(forKey: token) { return (true, subscription) }
            if table.pending.contains(token) {
                table.endedWhilePending.insert(token)
                return (true, nil)
            }
            return (false, nil)
        }
        if let subscription = outcome.1 { subscription.end(context) }
        return outcome.0
    }

    /// Gives back a token allocated by ``allocateToken()`` whose subscription was refused: it never existed
    /// for the client (an invalidation of it is `unknownToken`) and no longer counts against the limit.
    func abandonToken(_ token: Int64) {
        tokens.withLock { table in
            table.pending.remove(token)
            table.endedWhilePending.remove(token)
        }
    }

    /// The subscription behind a live token of this connection.
    func subscription(of token: Int64) -> TokenSubscription? { tokens.withLock { $0.live[token] } }

    /// The answers of the batch being performed, while one is (see ``answeringAsOne(_:)``).
    private let batchAnswers = Mutex<[[UInt8]]?>(nil)

    var tokenCount: Int { tokens.withLock { $0.live.count + $0.pending.count } }

    private func releaseAllTokens() {
        let all = tokens.withLock { table -> [TokenSubscription] in
            table.endedWhilePending.formUnion(table.pending)
            defer { table.live.removeAll() }
            return Array(table.live.values)
        }
        for subscription in all { subscription.end(context) }
    }

    // MARK: Frames

    private func handle(_ frame: InboundFrame) async {
        switch frame {
        case .oversized(let byteCount):
            let limit = maxFrameBytes
            respond(
                error: RPCError(
                    code: .limitExceeded,
                    message:
                        "a frame of at least \(byteCount) bytes exceeds the limit of \(limit) bytes; it was discarded up to the next newline",
                    data: ["limit": "maxFrameBytes", "maxFrameBytes": .integer(limit)]
                ),
                id: nil
            )
        case .message(let buffer):
            await RequestHandler(connection: self).handle(buffer)
        }
    }

    func respond(result: some Encodable & Sendable, id: RequestID) {
        respond(id: id) { try WireJSON.bytes(RPCResponse(id: id, result: result)) }
    }

    /// An answer that writes itself (a token: see ``WireWritable``).
    func respond(result: some WireWritable, id: RequestID) {
        respond(id: id) { try WireJSON.bytes(RPCResponse(id: id, result: result)) }
    }

    /// A new token's answer, for a task going to the connection's loop anyway to queue there (a token's join:
    /// ``ObjectTopicHub/subscribe(key:options:sinceVersion:fields:outbox:eventLoop:token:prefix:answer:onFinished:)``);
    /// `nil` when it was answered otherwise, as any answer is (queued now, so still before the join): kept for its
    /// batch's array, or a request whose id is not an integer (rare: the encoder writes it).
    func tokenAnswer(_ token: Int64, id: RequestID) -> LoopAnswer? {
        guard batchAnswers.withLock({ $0 == nil }), case .number(let number) = id else {
            respond(result: TokenResult(token: token), id: id)
            return nil
        }
        return .token(token, id: number)
    }

    private func respond(id: RequestID, encoded: () throws -> [UInt8]) {
        do {
            answer(try encoded())
        } catch {
            logger.error("could not encode a response", metadata: ["error": "\(error)"])
            respond(error: RPCError(code: .internalError, message: "the daemon could not encode its answer; see its log"), id: id)
        }
    }

    func respond(error: RPCError, id: RequestID?) {
        if let bytes = try? WireJSON.bytes(RPCErrorResponse(id: id, error: error)) { answer(bytes) }
    }

    /// Runs `body` (a batch's requests, one after the other) and sends the answers they gave as one JSON
    /// array, in their order; nothing when they gave none (a batch of notifications). Requests of a
    /// connection are performed one at a time, so no other answer can fall in between.
    func answeringAsOne(_ body: () async -> Void) async {
        batchAnswers.withLock { $0 = [] }
        await body()
        let answers = batchAnswers.withLock { answers in
            defer { answers = nil }
            return answers ?? []
        }
        guard !answers.isEmpty else { return }
        var frame = ByteBuffer()
        frame.reserveCapacity(answers.reduce(2) { $0 + $1.count + 1 })
        frame.writeInteger(UInt8(ascii: "["))
        for (index, answer) in answers.enumerated() {
            if index > 0 { frame.writeInteger(UInt8(ascii: ",")) }
            frame.writeBytes(answer)
        }
        frame.writeBytes(Array("]\n".utf8))
        outbox.enqueue(frame)
    }

    /// Sends one answer, or keeps it for its batch's array.
    private func answer(_ bytes: [UInt8]) {
        let kept = batchAnswers.withLock { answers -> Bool in
            guard answers != nil else { return false }
            answers!.append(bytes)
            return true
        }
        guard !kept else { return }
        outbox.enqueue(Self.line(bytes))
    }

    /// An answer's bytes as a frame: followed by `\n`.
    private static func line(_ bytes: [UInt8]) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.reserveCapacity(bytes.count + 1)
        frame.writeBytes(bytes)
        frame.writeInteger(UInt8(ascii: "\n"))
        return frame
    }
}

/// A token bucket: up to `perSecond` requests in a burst, refilled at `perSecond` per second. Pure.
package struct RequestRate: Sendable {
    let perSecond: Int
    private var available: Double
    private var last: ContinuousClock.Instant?

    package init(perSecond: Int) {
        self.perSecond = max(perSecond, 1)
        available = Double(self.perSecond)
    }

    package mutating func admit(now: ContinuousClock.Instant) -> Bool {
        if let last {
            let elapsed = Double((now - last).components.attoseconds) / 1e18 + Double((now - last).components.seconds)
            available = min(Double(perSecond), available + elapsed * Double(perSecond))
        }
        last = now
        guard available >= 1 else { return false }
        available -= 1
        return true
    }
}
