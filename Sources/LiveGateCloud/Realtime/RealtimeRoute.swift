// Licensed under the Apache License, Version 2.0.

import Foundation
import Hummingbird
import HummingbirdWebSocket
import LiveCloudAPI
import Logging
import NIOWebSocket

/// `GET /v1/realtime`: the WebSocket that carries subscriptions and events (see `Protocol/cloud/realtime.md`).
struct RealtimeRoute: Sendable {
    let auth: AuthService
    let hub: RealtimeHub
    let faults: FaultInjector?

    func register(on router: Router<BasicWebSocketRequestContext>) {
        router.ws(
            RouterPath(CloudPath.realtime),
            shouldUpgrade: { request, _ in
                _ = try auth.user(for: request)
                if faults?.refusesConnections == true {
                    throw CloudHTTPError(.serviceUnavailable, .unavailable, "fault injection: realtime connections are refused for now")
                }
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, context in
                let subscriber = hub.connect()
                defer { hub.disconnect(subscriber) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await text in subscriber.messages { try await outbound.write(.text(text)) }
                        if subscriber.wasCutOff {
                            context.logger.warning("realtime subscriber cut off: too slow")
                            try await outbound.close(.policyViolation, reason: "too slow: event queue full")
                        } else if subscriber.wasDropped {
                            try await outbound.close(.goingAway, reason: "fault injection: connection dropped")
                        }
                    }
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message else { continue }
                        handle(text, from: subscriber)
                    }
                    group.cancelAll()
                }
            }
        )
    }

    private func handle(_ text: String, from subscriber: RealtimeSubscriber) {
        let request: RealtimeClientMessage
        do {
            request = try JSONDecoder().decode(RealtimeClientMessage.self, from: Data(text.utf8))
        } catch {
            subscriber.send(
                Self.encode(
                    .error(ref: nil, code: .badRequest, message: "not a realtime request: expected {\"op\",\"ref\",\"topic\"}")
                )
            )
            return
        }
        let ack = Self.encode(.ack(ref: request.ref))
        switch request.op {
        case .subscribe: hub.subscribe(subscriber, to: request.topic, ack: ack)
        case .unsubscribe: hub.unsubscribe(subscriber, from: request.topic, ack: ack)
        }
    }

    private static func encode(_ message: RealtimeServerMessage) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(message), as: UTF8.self)) ?? "{}"
    }
}
