// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import NIOCore
import NIOPosix
import SeededRandom
import Synchronization

/// What the checker saw and broke, shared by its clients: a bounded trace of events (notifications, requests,
/// faults) and the violations found.
final class CheckerLog: Sendable {
    private struct State {
        var trace: [String] = []
        var violations: [String] = []
        var notifications = 0
    }
    private let state = Mutex(State())
    private let start = ContinuousClock.now
    static let traceLimit = 20000

    func note(_ event: String) {
        let elapsed = ContinuousClock.now - start
        let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        state.withLock { state in
            state.trace.append("\(ms) ms  \(event)")
            if state.trace.count > Self.traceLimit { state.trace.removeFirst(state.trace.count - Self.traceLimit) }
        }
    }

    func violation(_ what: String) {
        note("VIOLATION " + what)
        state.withLock { $0.violations.append(what) }
    }

    func countNotification() { state.withLock { $0.notifications += 1 } }

    var violations: [String] { state.withLock { $0.violations } }
    var notifications: Int { state.withLock { $0.notifications } }

    /// The whole trace (its last ``traceLimit`` events).
    var fullTrace: [String] { state.withLock { $0.trace } }

    /// The trace's events that mention `subject` (a client's token, an id) or a fault, oldest first: the
    /// shortest account of a violation the log can give.
    func trace(mentioning subjects: [String], last count: Int = 60) -> [String] {
        state.withLock { state in
            Array(state.trace.filter { line in line.contains("FAULT") || subjects.contains { line.contains($0) } }.suffix(count))
        }
    }
}

/// One local process as the checker plays it: a raw connection to the daemon speaking `Protocol/ipc` from
/// its README, observing objects and query windows, and checking every notification against the protocol's
/// promises as it arrives. Across daemon restarts it reconnects and observes again, objects from the last
/// version it saw (`sinceVersion`).
final class CheckerClient: Sendable {
    /// An observation the client keeps alive across connections.
    enum Plan: Sendable {
        case object(id: String)
        case collection(slot: Int, CheckedQuery)
    }

    struct ObjectToken {
        var id: String
        var since: Int64?
        /// The version a next snapshot may have without a gap: the last snapshot's (or `since`), one more
        /// after a deletion. `nil` before anything is known.
        var baseline: Int64?
        var lastVersion: Int64?
        var resyncSinceLast = false
        var lastFresh = false
        var lastData: JSONValue?
        var lastPending = false
        var deleted = false
        var notifications = 0
        /// Told that its `since` is current (`unchanged`), and nothing since: it holds that version's data.
        var confirmedUnchanged = false
    }

    struct CollectionToken {
        var slot: Int
        var query: CheckedQuery
        var window: [CheckedItem] = []
        var count = 0
        var hasNext = false
        var hasPrevious = false
        var fresh = false
        var pending: Set<String> = []
        var pages = 1
        var notifications = 0
        /// Observed with its pages (`pages` > 1, after a reconnection): its first state with data must hold
        /// them all, not one page (Protocol/ipc, `collection.observe` `pages`).
        var restoring = false
    }

    enum Token {
        case object(ObjectToken)
        case collection(CollectionToken)
    }

    enum Request {
        /// `since`: the `sinceVersion` sent (an object's).
        /// `pages`: the pages a window was observed with.
        case observe(Plan, since: Int64? = nil, pages: Int = 1)
        case nextPage(token: Int64)
        case resetPage(token: Int64)
        case invalidate(token: Int64)
        case write(id: String)
        case stats
    }

    private struct State {
        var buffer: [UInt8] = []
        var nextID = 1
        var requests: [Int: Request] = [:]
        var tokens: [Int64: Token] = [:]
        /// Per object id: the newest version this client saw fresh (the `sinceVersion` of its next observation).
        var objectLineage: [String: Int64] = [:]
        /// Per query slot: the newest version of each item this client's windows of that query showed.
        var windowLineage: [Int: [String: Int64]] = [:]
        /// Per query slot: the pages its window had, observed with them all again after a reconnection.
        var windowPages: [Int: Int] = [:]
        var connected = false
        var connection = 0
        var statsTokens: Int?
        var statsPendingWrites: Int?
        /// Tokens whose invalidation was sent and not answered yet.
        var invalidating: Set<Int64> = []
        /// Objects observed anew during the run (``observeAnew(_:)``), beyond the plans, oldest first: kept
        /// across connections as the plans are.
        var anew: [String] = []
    }

    /// How many objects observed anew a client keeps; observing one more ends the oldest's token.
    static let anewKept = 3

    let name: String
    private let initialPlans: [Plan]
    /// What the client keeps observing: its initial plans and the objects it observed anew.
    var plans: [Plan] { state.withLock { plans(in: $0) } }

    private func plans(in state: State) -> [Plan] { initialPlans + state.anew.map { .object(id: $0) } }
    private let log: CheckerLog
    private let ledger: WriteLedger
    private let state = Mutex(State())
    private let channel = Mutex<(any Channel)?>(nil)

    init(name: String, plans: [Plan], log: CheckerLog, ledger: WriteLedger) {
        self.name = name
        self.initialPlans = plans
        self.log = log
        self.ledger = ledger
    }

    /// Drops the requests of a connection that ended: a write among them may or may not be in the outbox.
    private func dropRequests(_ state: inout State) {
        for case .write(let id) in state.requests.values { ledger.unknown(id) }
        state.requests = [:]
    }

    private final class Reader: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let client: CheckerClient
        let connection: Int
        init(_ client: CheckerClient, connection: Int) {
            self.client = client
            self.connection = connection
        }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { client.received(unwrapInboundIn(data), connection: connection) }
        func channelInactive(context: ChannelHandlerContext) { client.closed(connection: connection) }
    }

    var isConnected: Bool { state.withLock { $0.connected } }

    /// Connects (once the socket answers) and observes every plan again.
    func connect(_ socketPath: String) async throws {
        let connection = state.withLock { state -> Int in
            state.connection += 1
            state.buffer = []
            dropRequests(&state)
            state.tokens = [:]
            return state.connection
        }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Reader(self, connection: connection)) }
            }
            .connect(unixDomainSocketPath: socketPath).get()
        self.channel.withLock { $0 = channel }
        state.withLock { $0.connected = true }
        log.note("\(name) connected (#\(connection))")
        try await send("hello", ["client": .string(name), "protocol": 1], nil)
        for plan in plans { try await observe(plan) }
    }

    func disconnect() {
        channel.withLock { $0 }?.close(promise: nil)
    }

    /// Stops or resumes reading (a slow reader: the daemon must coalesce its notifications, then catch up).
    func setReading(_ reading: Bool) async {
        guard let channel = channel.withLock({ $0 }) else { return }
        try? await channel.setOption(ChannelOptions.autoRead, value: reading).get()
        if reading { channel.read() }
    }

    func observe(_ plan: Plan) async throws {
        switch plan {
        case .object(let id):
            var params: [String: JSONValue] = ["collection": .string(LiveSemanticsChecker.collection), "id": .string(id)]
            let since = state.withLock { $0.objectLineage[id] }
            if let since { params["sinceVersion"] = .integer(since) }
            try await send("object.observe", .object(JSONObject(params)), .observe(plan, since: since))
        case .collection(let slot, let query):
            let pages = state.withLock { $0.windowPages[slot] ?? 1 }
            var params: [String: JSONValue] = [
                "collection": .string(LiveSemanticsChecker.collection), "query": query.json, "pageSize": .integer(query.pageSize),
            ]
            if pages > 1 { params["pages"] = .integer(pages) }
            try await send("collection.observe", .object(JSONObject(params)), .observe(plan, pages: pages))
        }
    }

    /// Observes `id` with a new token and keeps it observed (across connections too); beyond ``anewKept`` such
    /// objects, the oldest one's token is ended.
    func observeAnew(_ id: String) async throws {
        let ended = state.withLock { state -> [Int64] in
            state.anew.append(id)
            guard state.anew.count > Self.anewKept else { return [] }
            let oldest = state.anew.removeFirst()
            let tokens = state.tokens.compactMap { token, kind -> Int64? in
                guard case .object(let t) = kind, t.id == oldest, !state.invalidating.contains(token) else { return nil }
                return token
            }
            state.invalidating.formUnion(tokens)
            return tokens
        }
        for token in ended { try await send("token.invalidate", ["token": .integer(token)], .invalidate(token: token)) }
        try await observe(.object(id: id))
    }

    /// A random action on the client's current tokens: page a window, or end a token and observe it again.
    func act(using random: inout SeededGenerator) async throws {
        let tokens = state.withLock { state in state.tokens.filter { !state.invalidating.contains($0.key) } }
        guard let (token, kind) = tokens.randomElement(using: &random) else { return }
        switch kind {
        case .collection:
            if Int.random(in: 0..<3, using: &random) == 0 {
                try await send("collection.resetPage", ["token": .integer(token)], .resetPage(token: token))
            } else {
                try await send("collection.nextPage", ["token": .integer(token)], .nextPage(token: token))
            }
        case .object(let object):
            state.withLock { _ = $0.invalidating.insert(token) }
            try await send("token.invalidate", ["token": .integer(token)], .invalidate(token: token))
            try await observe(.object(id: object.id))
        }
    }

    /// A local write through the daemon (queued, not waited for): a new rank and maybe a new group.
    func write(id: String, group: String, rank: Int) async throws {
        try await send(
            "object.update",
            [
                "collection": .string(LiveSemanticsChecker.collection), "id": .string(id),
                "data": ["group": .string(group), "rank": .integer(rank), "by": .string(name)], "wait": false,
            ],
            .write(id: id)
        )
    }

    func requestStats() async throws {
        state.withLock {
            $0.statsTokens = nil
            $0.statsPendingWrites = nil
        }
        try await send("daemon.stats", [:], .stats)
    }

    var statsTokens: Int? { state.withLock { $0.statsTokens } }
    /// Writes acknowledged to clients that wait in the daemon's outbox (`daemon.stats`).
    var statsPendingWrites: Int? { state.withLock { $0.statsPendingWrites } }
    var tokenCount: Int { state.withLock { $0.tokens.count } }
    var outstandingRequests: Int { state.withLock { $0.requests.count } }

    private func send(_ method: String, _ params: JSONValue, _ request: Request?) async throws {
        guard let channel = channel.withLock({ $0 }) else { throw CheckFailure("\(name) is not connected") }
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            if let request { state.requests[state.nextID] = request }
            return state.nextID
        }
        let frame: JSONValue = ["jsonrpc": "2.0", "id": .integer(id), "method": .string(method), "params": params]
        let text = String(decoding: try JSONEncoder().encode(frame), as: UTF8.self)
        try await channel.writeAndFlush(ByteBuffer(string: text + "\n"))
    }

    // MARK: Reading

    fileprivate func closed(connection: Int) {
        state.withLock { state in
            guard state.connection == connection else { return }
            state.connected = false
            state.tokens = [:]
            dropRequests(&state)
            state.invalidating = []
        }
        log.note("\(name) disconnected (#\(connection))")
    }

    fileprivate func received(_ buffer: ByteBuffer, connection: Int) {
        var lines: [String] = []
        state.withLock { state in
            guard state.connection == connection else { return }
            state.buffer.append(contentsOf: buffer.readableBytesView)
            while let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: state.buffer[..<newline], as: UTF8.self))
                state.buffer.removeSubrange(...newline)
            }
        }
        for line in lines { handle(line, connection: connection) }
    }

    private func handle(_ line: String, connection: Int) {
        let message: JSONValue
        do { message = try JSONValue(parsing: line) } catch {
            log.violation("\(name): a line that is not JSON: \(line.prefix(200))")
            return
        }
        if let method = message["method"]?.stringValue {
            guard let params = message["params"] else { return log.violation("\(name): \(method) without params") }
            log.countNotification()
            switch method {
            case "object.changed": objectChanged(params, line: line)
            case "collection.changed": collectionChanged(params, line: line)
            case "connection.closing": log.note("\(name) told: \(line.prefix(300))")
            default: log.violation("\(name): unexpected notification \(method)")
            }
            return
        }
        guard let id = message["id"]?.numberValue.map(Int.init) else { return }
        let request = state.withLock { $0.requests.removeValue(forKey: id) }
        guard let request else { return }
        if let error = message["error"] {
            answerFailed(request, error: error)
            return
        }
        let result = message["result"] ?? .null
        switch request {
        case .observe(let plan, let since, let pages):
            guard let token = result["token"]?.numberValue.map(Int64.init) else {
                return log.violation("\(name): observe answered without a token: \(line.prefix(300))")
            }
            state.withLock { state in
                switch plan {
                case .object(let id):
                    state.tokens[token] = .object(ObjectToken(id: id, since: since, baseline: since))
                case .collection(let slot, let query):
                    state.tokens[token] = .collection(CollectionToken(slot: slot, query: query, pages: pages, restoring: pages > 1))
                }
            }
            log.note("\(name) t\(token) observes \(plan)\(since.map { " since v\($0)" } ?? "")\(pages > 1 ? " with \(pages) pages" : "")")
        case .nextPage(let token), .resetPage(let token):
            log.note("\(name) t\(token) paged: \(line.prefix(120))")
            guard result["moved"] == .bool(true) else { return }
            state.withLock { state in
                guard case .collection(var t)? = state.tokens[token] else { return }
                if case .nextPage = request { t.pages += 1 } else { t.pages = 1 }
                state.tokens[token] = .collection(t)
                state.windowPages[t.slot] = t.pages
            }
        case .invalidate(let token):
            state.withLock { state in
                state.tokens[token] = nil
                state.invalidating.remove(token)
            }
        case .write(let id):
            ledger.applied(id)
            log.note("\(name) wrote \(id): \(line.prefix(160))")
        case .stats:
            state.withLock {
                $0.statsTokens = result["tokens"]?.numberValue.map(Int.init)
                $0.statsPendingWrites = result["pendingWrites"]?.numberValue.map(Int.init)
            }
        }
    }

    private func answerFailed(_ request: Request, error: JSONValue) {
        let code = error["code"]?.numberValue.map(Int.init) ?? 0
        let message = error["message"]?.stringValue ?? ""
        log.note("\(name) request \(request) failed: \(code) \(message)")
        switch request {
        case .observe, .nextPage, .resetPage, .stats:
            // The token is not held (observe) or not changed; an observation fails only when the cloud cannot
            // be reached (a restart of it may be under way): observe again later.
            if case .observe(let plan, _, _) = request, code != -32004 {
                log.violation("\(name): observing \(plan) failed with \(code) \(message)")
            }
        case .invalidate(let token):
            log.violation("\(name): invalidating its token \(token) failed with \(code) \(message)")
        case .write:
            // A queued write is refused only by the disk; the checker's disk does not fail.
            log.violation("\(name): a local write failed with \(code) \(message)")
        }
    }

    /// The plans whose observation failed and must be made again (their tokens are not held).
    func missingPlans() -> [Plan] {
        state.withLock { state in
            plans(in: state).filter { plan in
                let pending = state.requests.values.contains { request in
                    if case .observe(let p, _, _) = request { return "\(p)" == "\(plan)" }
                    return false
                }
                if pending { return false }
                return !state.tokens.values.contains { token in
                    switch (token, plan) {
                    case (.object(let t), .object(let id)): t.id == id
                    case (.collection(let t), .collection(let slot, _)): t.slot == slot
                    default: false
                    }
                }
            }
        }
    }

    private func objectChanged(_ params: JSONValue, line: String) {
        guard let token = params["token"]?.numberValue.map(Int64.init) else { return log.violation("\(name): object.changed without token") }
        let snapshot = params["snapshot"].flatMap { $0 == .null ? nil : CheckedItem(snapshot: $0) }
        let dataStatus = params["dataStatus"]?.stringValue ?? "?"
        let loadingStatus = params["loadingStatus"]?.stringValue ?? "?"
        let resync = params["resync"] == .bool(true)
        let pending = params["pendingWrites"] == .bool(true)
        let unchanged = params["unchanged"] == .bool(true)
        log.note(
            "\(name) t\(token) object \(snapshot?.description ?? "null") \(dataStatus)/\(loadingStatus)\(resync ? " RESYNC" : "")\(pending ? " pending" : "")\(unchanged ? " UNCHANGED" : "")"
        )
        var problems: [String] = []
        state.withLock { state in
            guard case .object(var t)? = state.tokens[token] else {
                problems.append("a notification for t\(token), which the client does not hold")
                return
            }
            t.notifications += 1
            defer { state.tokens[token] = .object(t) }
            if t.notifications == 1, loadingStatus == "notLoading" {
                problems.append("t\(token)'s first state is notLoading (Protocol/ipc: notExist then loading, or the cache's copy)")
            }
            if pending, snapshot == nil {
                // This client's writes are updates: one pending always has data to show.
                problems.append("t\(token) shows a pending update with no data (\(dataStatus)/\(loadingStatus))")
            }
            if resync {
                t.resyncSinceLast = true
                return
            }
            // A re-observation told that the version it holds is the cloud's (Protocol/ipc, `sinceVersion`): only
            // as its first notification, with no snapshot, fresh and loaded.
            if unchanged {
                guard let since = t.since, t.notifications == 1, snapshot == nil, dataStatus == "fresh", loadingStatus == "loaded", !pending else {
                    problems.append(
                        "t\(token) was told unchanged where it may not be (sinceVersion \(t.since.map(String.init) ?? "none"), notification \(t.notifications))"
                    )
                    return
                }
                t.lastVersion = since
                t.baseline = since
                t.lastFresh = true
                t.lastPending = false
                t.deleted = false
                t.confirmedUnchanged = true
                return
            }
            // Until a re-observation is told something, nothing it holds already is sent (Protocol/ipc,
            // `sinceVersion`); after that, the full state follows whatever its version.
            let firstSince = t.notifications == 1 ? t.since : nil
            let failed = loadingStatus == "error" || dataStatus == "error"
            guard let snapshot else {
                if let since = firstSince, dataStatus == "notExist", loadingStatus == "loading", !pending {
                    problems.append("t\(token) (sinceVersion \(since)) was told nothing is known yet: it holds v\(since)")
                }
                if dataStatus == "notExist", !t.deleted || t.resyncSinceLast {
                    t.deleted = true
                    // The deletion has a version of its own: one more than the last data's, when the token
                    // was continuous. After a resync notice (or a re-observation's first answer) versions
                    // before the deletion may have been missed, and a notification of a deletion carries no
                    // version: the next one cannot be checked for a gap.
                    let continuous = (t.lastFresh && !t.lastPending && !t.resyncSinceLast) || (t.lastVersion == nil && t.since != nil)
                    t.baseline = continuous ? (t.lastVersion ?? t.since).map { $0 + 1 } : nil
                }
                t.lastFresh = dataStatus == "notExist" && loadingStatus == "loaded"
                t.resyncSinceLast = false
                return
            }
            if snapshot.id != t.id { problems.append("t\(token) observes \(t.id) but got \(snapshot.id)") }
            if let since = firstSince, snapshot.version <= since, !failed {
                problems.append("t\(token) (sinceVersion \(since)) got \(snapshot) first: a version it already saw")
            }
            if let last = t.lastVersion, snapshot.version < last {
                problems.append("t\(token) went back from v\(last) to v\(snapshot.version)")
            }
            if let last = t.lastVersion, snapshot.version == last, !pending, !t.lastPending, let data = t.lastData, data != snapshot.data {
                problems.append("t\(token) got v\(last) twice with different data")
            }
            // A gap: versions skipped with no resync notice, where the token was fresh (or re-observed from a
            // version it saw). A fetch after the cached copy (local → fresh, no sinceVersion) is no gap.
            // A confirmation of this host's write may skip the versions others wrote meanwhile: the write
            // replaced them (spec: "the confirmation brings the cloud's new version").
            let continuous = (t.lastFresh && !t.lastPending) || (t.lastVersion == nil && t.since != nil)
            if continuous, !t.resyncSinceLast, let baseline = t.baseline, snapshot.version > baseline + 1, !pending {
                problems.append("t\(token) skipped from v\(baseline) to v\(snapshot.version) without a resync notice")
            }
            t.lastVersion = snapshot.version
            t.baseline = snapshot.version
            t.lastData = snapshot.data
            t.lastPending = pending
            t.lastFresh = dataStatus == "fresh" && loadingStatus == "loaded"
            t.resyncSinceLast = false
            t.deleted = false
            t.confirmedUnchanged = false
            if t.lastFresh, !pending { state.objectLineage[t.id] = max(state.objectLineage[t.id] ?? 0, snapshot.version) }
        }
        for problem in problems { log.violation("\(name): \(problem)") }
    }

    private func collectionChanged(_ params: JSONValue, line: String) {
        guard let token = params["token"]?.numberValue.map(Int64.init) else { return log.violation("\(name): collection.changed without token") }
        let dataStatus = params["dataStatus"]?.stringValue ?? "?"
        let loadingStatus = params["loadingStatus"]?.stringValue ?? "?"
        let resync = params["resync"] == .bool(true)
        let reset = params["reset"] == .bool(true)
        var problems: [String] = []
        var summary = ""
        state.withLock { state in
            guard case .collection(var t)? = state.tokens[token] else {
                problems.append("a notification for t\(token), which the client does not hold")
                return
            }
            t.notifications += 1
            defer { state.tokens[token] = .collection(t) }
            do {
                let changes = try CheckedChanges(params: params)
                t.window = try changes.apply(to: reset ? [] : t.window)
            } catch {
                problems.append("t\(token)'s change set does not fit its window of \(t.window.count): \(error): \(line.prefix(600))")
                return
            }
            let size = params["size"]?.numberValue.map(Int.init) ?? -1
            if size != t.window.count {
                // The message itself: its change set fits the window the client held, so the daemon's differs.
                problems.append("t\(token) says size \(size) but its window holds \(t.window.count): \(line.prefix(600))")
            }
            t.count = params["count"]?.numberValue.map(Int.init) ?? -1
            t.hasNext = params["hasNext"] == .bool(true)
            t.hasPrevious = params["hasPrevious"] == .bool(true)
            t.fresh = dataStatus == "fresh" && loadingStatus == "loaded"
            if case .array(let ids)? = params["pendingIds"] { t.pending = Set(ids.compactMap(\.stringValue)) } else { t.pending = [] }
            // A window observed with its pages comes whole: its first state with data is not one page while it
            // says more follows (a margin of a page for items that left while its pages were read). Its count
            // is the cloud's, so a pending write that takes an item out shows fewer items, and no more follow.
            if t.restoring, dataStatus == "fresh" || dataStatus == "local" {
                t.restoring = false
                if t.window.count <= (t.pages - 1) * t.query.pageSize, t.hasNext || t.hasPrevious {
                    problems.append("t\(token) observed with \(t.pages) pages came with \(t.window.count) of \(t.count) items: page by page")
                }
            }
            summary =
                "\(t.window.map(\.description).joined(separator: " ")) count \(t.count)\(t.hasNext ? " next" : "")\(t.pending.isEmpty ? "" : " pending \(t.pending.sorted())")"
            if Set(t.window.map(\.id)).count != t.window.count { problems.append("t\(token)'s window holds an id twice: \(summary)") }
            if let stray = t.window.first(where: { !t.query.matches($0.data) }) {
                problems.append("t\(token)'s window \(t.query) holds \(stray), which does not match")
            }
            if let index = t.window.indices.dropFirst().first(where: { !t.query.precedes(t.window[$0 - 1], t.window[$0]) }) {
                problems.append("t\(token)'s window \(t.query) is out of order at \(index): \(summary)")
            }
            var lineage = state.windowLineage[t.slot] ?? [:]
            for item in t.window where !t.pending.contains(item.id) {
                if t.fresh, let newest = lineage[item.id], item.version < newest {
                    problems.append("t\(token) shows \(item) fresh, older than v\(newest) the client already had")
                }
                lineage[item.id] = max(lineage[item.id] ?? 0, item.version)
            }
            state.windowLineage[t.slot] = lineage
        }
        log.note(
            "\(name) t\(token) window \(dataStatus)/\(loadingStatus)\(resync ? " RESYNC" : "")\(reset ? " reset" : ""): \(summary)"
        )
        for problem in problems { log.violation("\(name): \(problem)") }
    }

    // MARK: Settled state

    /// Where this client's tokens differ from `live` (the cloud's objects), once everything has settled.
    func differences(from live: [String: CheckedItem]) -> [String] {
        state.withLock { state in
            var found: [String] = []
            for (token, kind) in state.tokens.sorted(by: { $0.key < $1.key }) {
                switch kind {
                case .object(let t):
                    let expected = live[t.id]
                    if t.confirmedUnchanged, let since = t.since, let expected, expected.version == since {
                        // Re-observed at the version it had, unchanged since: told so (`unchanged`), with no data
                        // (no snapshot of `sinceVersion` or older), and nothing is missing. (Once told anything, a
                        // resync notice say, it must be told the full state.)
                        continue
                    }
                    if !t.lastFresh && !(expected == nil && t.deleted) {
                        found.append("t\(token) (\(t.id)) is not fresh/loaded")
                    } else if let expected, t.lastVersion != expected.version || t.lastData != expected.data || t.deleted {
                        found.append("t\(token) shows \(t.id) v\(t.lastVersion ?? -1), the cloud has \(expected)")
                    } else if expected == nil, !t.deleted {
                        found.append("t\(token) shows \(t.id) v\(t.lastVersion ?? -1), the cloud has it deleted")
                    }
                case .collection(let t):
                    let result = t.query.result(Array(live.values))
                    let page = Array(result.prefix(t.pages * t.query.pageSize))
                    if !t.fresh { found.append("t\(token) \(t.query) is not fresh/loaded") }
                    if t.window != page {
                        found.append(
                            "t\(token) \(t.query) window \(t.window.map(\.description)) ≠ the cloud's \(page.map(\.description))"
                        )
                    }
                    if t.count != result.count { found.append("t\(token) \(t.query) count \(t.count) ≠ \(result.count)") }
                    if t.hasNext != (result.count > t.window.count) { found.append("t\(token) \(t.query) hasNext \(t.hasNext) wrong") }
                    if t.hasPrevious { found.append("t\(token) \(t.query) hasPrevious on a first-anchored window") }
                    if !t.pending.isEmpty { found.append("t\(token) still shows pending writes \(t.pending)") }
                }
            }
            return found.map { "\(name): \($0)" }
        }
    }
}
