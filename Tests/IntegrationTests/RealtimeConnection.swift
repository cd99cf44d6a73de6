// Licensed under the Apache License, Version 2.0.

import Foundation
import HTTPTypes
import LiveCloudAPI
import Logging
import WSClient

/// Runs `body` on one realtime connection to the cloud at `baseURL` (`http://HOST:PORT`); `body` sends
/// requests and reads decoded server messages. The whole exchange fails after `timeout`: a message that never
/// comes (a replay one event short) fails the test instead of hanging it.
func withRealtimeConnection(
    to baseURL: String,
    token: String,
    timeout: Duration = .seconds(60),
    _ body:
        @escaping @Sendable (
            _ send: @Sendable (any Encodable & Sendable) async throws -> Void, _ next: () async throws -> RealtimeServerMessage
        )
        async throws -> Void
) async throws {
    var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 24)
    configuration.additionalHeaders[.authorization] = "Bearer \(token)"
    let url = baseURL.replacingOccurrences(of: "http://", with: "ws://") + CloudPath.realtime
    try await withTimeout(timeout, "the realtime exchange with \(url) did not end") { [configuration] in
        try await exchange(url: url, configuration: configuration, body)
    }
}

private func exchange(
    url: String,
    configuration: WebSocketClientConfiguration,
    _ body:
        @escaping @Sendable (
            _ send: @Sendable (any Encodable & Sendable) async throws -> Void, _ next: () async throws -> RealtimeServerMessage
        )
        async throws -> Void
) async throws {
    try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger(label: "test")) { inbound, outbound, _ in
        var iterator = inbound.messages(maxSize: 1 << 24).makeAsyncIterator()
        try await body(
            { request in
                let text = try (request as? RawRealtimeFrame)?.text ?? String(decoding: JSONEncoder().encode(request), as: UTF8.self)
                try await outbound.write(.text(text))
            },
            {
                guard case .text(let text) = try await iterator.next() else { throw ClusterError("the realtime connection closed") }
                return try JSONDecoder().decode(RealtimeServerMessage.self, from: Data(text.utf8))
            }
        )
    }
}

/// A frame sent as it is, not encoded (for input no encoder would write).
struct RawRealtimeFrame: Encodable, Sendable {
    let text: String

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
