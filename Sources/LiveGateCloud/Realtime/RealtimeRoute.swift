// Licensed under the Apache License, Version 2.0.

import Foundation
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import Logging
import NIOWebSocket

/// `GET /v1/realtime`: the WebSocket that carries subscriptions and events (see `Protocol/cloud/README.md`, Realtime).
struct RealtimeRoute: Sendable {
    let auth: AuthService
    let permissions: Permissions
    let hub: RealtimeHub
    let store: any CloudStore
    let faults: FaultInjector?
    let cap: ConnectionCap

    func register(on router: Router<CloudRequestContext>) {
        router.ws(
            RouterPath(CloudPath.realtime),
            shouldUpgrade: { request, context in
                // A plain GET (no WebSocket upgrade asked) comes here through the router: 426, not an empty 200.
                guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                    var error = CloudHTTPError(
                        .upgradeRequired,
                        .badRequest,
                        "\(CloudPath.realtime) is a WebSocket: connect with 'Upgrade: websocket' (Protocol/cloud, Realtime)"
                    )
                    error.headers = [.upgrade: "websocket", .connection: "Upgrade"]
                    throw error
                }
                // Refused with its reason, not the WebSocket library's empty 400 (see UpgradeRefusalWriter).
                func refuse(_ error: CloudHTTPError) async throws -> Never {
                    try? await context.channel.pipeline.addHandler(UpgradeRefusalWriter(error)).get()
                    throw error
                }
                do {
                    _ = try await auth.user(for: request)  // 401 before upgrading
                } catch let error as CloudHTTPError {
                    try await refuse(error)
                }
                if faults?.refusesConnections == true {
                    try await refuse(CloudHTTPError(.serviceUnavailable, .unavailable, "fault injection: realtime connections are refused for now"))
                }
                cap.markRealtime(context.channel)  // never closed to make room for another connection
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, context in
                // Checked at the upgrade; the name decides which topics this connection may hear.
                let user = (try? await auth.user(for: context.request)) ?? ""
                let subscriber = hub.connect(user: user)
                defer { hub.disconnect(subscriber) }
                // On graceful shutdown the connection is closed (`goingAway`, with the reason) once what is
                // queued is written, so the cloud stops while clients are connected; they reconnect to its next
                // run. This close is the only one on shutdown (see ConnectionShutdown), and it returns once its
                // frame is handed to the channel, so the frame goes out before the connection is closed.
                // Whichever side ends first ends the other: a close sent ends the reading too, so the cloud
                // does not wait for the client's next message.
                try await ConnectionShutdown.withHandler {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await text in subscriber.messages { try await outbound.write(.text(text)) }
                            if subscriber.wasCutOff {
                                context.logger.warning("realtime subscriber cut off: too slow")
                                try await outbound.close(.policyViolation, reason: "too slow: event queue full")
                            } else if let reason = subscriber.closeReason {
                                try await outbound.close(.goingAway, reason: reason.message)
                            }
                        }
                        group.addTask {
                            for try await message in inbound.messages(maxSize: RealtimeClientBatch.maximumBytes) {
                                guard case .text(let text) = message else { continue }
                                await handle(text, from: subscriber, user: user, logger: context.logger)
                            }
                        }
                        try await group.next()
                        group.cancelAll()
                    }
                } onShutdown: {
                    subscriber.close(.shuttingDown)
                }
            }
        )
    }

    private func handle(_ text: String, from subscriber: RealtimeSubscriber, user: String, logger: Logger) async {
        hub.recordRealtimeMessage()
        let frame: RealtimeClientFrame
        do {
            frame = try CloudJSON.decode(RealtimeClientFrame.self, from: text)
        } catch {
            subscriber.send(
                RealtimeHub.encode(
                    .error(
                        ref: nil,
                        code: .badRequest,
                        message: "not a realtime request: expected {\"op\",\"ref\",\"topic\"} or {\"op\":\"batch\",\"requests\":[...]}"
                    )
                )
            )
            return
        }
        let requests: [RealtimeClientMessage]
        switch frame {
        case .single(let request):
            requests = [request]
        case .batch(let batch):
            guard (1...RealtimeClientBatch.maximumRequests).contains(batch.count) else {
                let message = "a batch holds 1 to \(RealtimeClientBatch.maximumRequests) requests, not \(batch.count): send several"
                subscriber.send(RealtimeHub.encode(.error(ref: nil, code: .badRequest, message: message)))
                return
            }
            requests = batch
        }
        if requests.contains(where: { $0.op == .subscribe }) {
            guard await eventsPublished(for: subscriber, logger: logger) else { return }
        }
        // In order, each answered as if it had come alone.
        for request in requests { await handle(request, from: subscriber, user: user, logger: logger) }
    }

    /// How long a subscription waits for the events committed before it to be published before the connection
    /// is closed instead (the event pump reconnects a second apart; it is milliseconds behind when it runs).
    static let publicationTimeout = Duration.seconds(10)

    /// Waits, before a frame's subscriptions are made, until every event committed when it came is published
    /// (at once for a store that publishes as it commits; see ``RealtimeHub/published(through:within:)``): one
    /// wait for a batch of subscriptions. When the log cannot be read or the events do not come, closes the
    /// connection (the client reconnects and resumes) rather than acknowledge a subscription at a seq that
    /// leaves out acknowledged writes; returns whether the requests may go on.
    private func eventsPublished(for subscriber: RealtimeSubscriber, logger: Logger) async -> Bool {
        guard !store.publishesAsItCommits else { return true }
        do {
            let head = try await store.lastSeq()
            if await hub.published(through: head, within: Self.publicationTimeout) { return true }
            logger.error(
                "the event log's head was not published in time; closing the realtime connection",
                metadata: ["seq": "\(head)", "timeout": "\(Self.publicationTimeout)"]
            )
        } catch {
            logger.error("reading the event log's head failed; closing the realtime connection", metadata: ["error": "\(error)"])
        }
        subscriber.close(.eventLogBehind)
        return false
    }

    private func handle(_ request: RealtimeClientMessage, from subscriber: RealtimeSubscriber, user: String, logger: Logger) async {
        if let delay = faults?.realtimeRequestDelay { _ = await FaultInjector.wait(delay) }
        switch request.op {
        case .subscribe:
            // A stream's ACL is read once the subscription is registered (``RealtimeHub/subscribe(_:to:ref:since:from:admission:)``);
            // a collection's permission is the configuration's.
            var admission: (@Sendable () async -> RealtimeHub.Refusal?)?
            if case .stream(let stream, let target) = request.topic {
                admission = { [faults] in
                    let refusal = await streamRefusal(stream, target, to: user, logger: logger)
                    if let delay = faults?.streamAdmissionDelay { _ = await FaultInjector.wait(delay) }
                    return refusal
                }
            } else if let collection = request.topic.collection, !permissions.allows(user, .read, collection) {
                subscriber.send(
                    RealtimeHub.encode(.error(ref: request.ref, code: .forbidden, message: "\(user) may not read the collection \(collection)"))
                )
                return
            }
            if request.since == nil, admission == nil {
                hub.subscribe(subscriber, to: request.topic, ref: request.ref)
                return
            }
            do {
                try await hub.subscribe(subscriber, to: request.topic, ref: request.ref, since: request.since, from: store, admission: admission)
            } catch {
                logger.error("reading the event log failed", metadata: ["error": "\(error)"])
                subscriber.send(RealtimeHub.encode(.error(ref: request.ref, code: .internalError, message: "the event log could not be read")))
            }
        case .unsubscribe:
            hub.unsubscribe(subscriber, from: request.topic, ack: RealtimeHub.encode(.ack(ref: request.ref)))
        }
    }

    /// Why `user` may not subscribe to `target`'s topic of `stream`, if they may not: no such stream, or
    /// `target`'s ACL does not list them among its subscribers.
    private func streamRefusal(_ stream: String, _ target: String, to user: String, logger: Logger) async -> RealtimeHub.Refusal? {
        do {
            guard let acl = try await store.acl(stream: stream, user: target) else {
                return (.notFound, "no stream \(stream)")
            }
            guard acl.subscribers.contains(user) else {
                return (
                    .forbidden,
                    "\(user) may not receive what is sent to \(target) on the stream \(stream): \(target)'s ACL does not list \(user) among its subscribers"
                )
            }
            return nil
        } catch {
            logger.error("reading a stream ACL failed", metadata: ["error": "\(error)"])
            return (.internalError, "the stream's access list could not be read")
        }
    }

}
