// Licensed under the Apache License, Version 2.0.

import HTTPTypes
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1

/// Two connections set up on `EmbeddedChannel`s, on the calling thread, before the server accepts any: one
/// taken down the plain-HTTP path by a request head, one upgraded to a WebSocket.
///
/// The first use of a generic type makes the Swift runtime instantiate its metadata. Twice in clean-clone CI
/// runs (debug builds, the suite's two passes at once), `livegate-cloud` died with SIGSEGV inside that
/// instantiation while a connection was being set up: `configureUpgradableHTTPServerPipeline` instantiating
/// `ByteToMessageHandler<HTTPRequestDecoder>` by its mangled name, the runtime checking `HTTPDecoder`'s
/// conformance, and `swift_checkMetadataState` reading a metadata pointer that was not one. The cloud sets up
/// connections on two event loops, so its first two connections can meet in those instantiations at once. A
/// small program setting up that pipeline on two threads at once crashed the same way twice in ~57,000 runs
/// here; with the setup done once on its main thread first, in none of 90,000. An instantiated type is only
/// looked up afterwards, so once this has run, the accepting loops no longer instantiate what a connection's
/// setup, its first request head and a WebSocket upgrade need.
///
/// The connections here are ``CloudChildChannel``s like the server's (same generic types); only their
/// responders differ: they answer nothing, and nothing drives them.
package enum ConnectionWarmUp {
    package enum Outcome: Equatable {
        case done
        case failed(String)
    }

    package static func run(configuration: HTTP1WebSocketUpgradeChannel.Configuration, logger: Logger) -> Outcome {
        let child = CloudChildChannel(
            base: HTTP1WebSocketUpgradeChannel(
                responder: { _, _, _ in },
                configuration: configuration,
                shouldUpgrade: { _, _, _ -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> in
                    .upgrade([:]) { _, _, _ in }
                }
            ),
            headTimeout: nil,
            cap: ConnectionCap(limit: 8)  // its own: the warm-up's connections are not the server's
        )
        let plain = "GET /warm-up HTTP/1.1\r\nHost: localhost\r\n\r\n"
        let upgrade =
            "GET /warm-up HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        switch settle(child, head: plain, logger: logger) {
        case .failure(let failure): return .failed("plain HTTP: \(failure.reason)")
        case .success(let written) where !written.isEmpty: return .failed("plain HTTP: answered \(written.prefix(40))")
        case .success: break
        }
        switch settle(child, head: upgrade, logger: logger) {
        case .failure(let failure): return .failed("WebSocket upgrade: \(failure.reason)")
        case .success(let written) where !written.hasPrefix("HTTP/1.1 101"):
            return .failed("WebSocket upgrade: answered \(written.prefix(40))")
        case .success: return .done
        }
    }

    private struct Failure: Error {
        let reason: String
    }

    /// Sets one connection up and feeds it `head`: what the connection wrote once NIO's upgrade handler has
    /// decided and left the pipeline.
    private static func settle(_ child: CloudChildChannel, head: String, logger: Logger) -> Result<String, Failure> {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        var written = ""
        do {
            let setUp = child.setup(channel: channel, logger: logger)
            channel.embeddedEventLoop.run()
            _ = try setUp.wait()
            try channel.writeInbound(ByteBuffer(string: head))
            channel.embeddedEventLoop.run()
            while let bytes = try channel.readOutbound(as: ByteBuffer.self) { written += String(buffer: bytes) }
        } catch {
            return .failure(Failure(reason: "\(error)"))
        }
        let deciding =
            (try? channel.pipeline.syncOperations.context(
                handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self
            )) != nil
        return deciding ? .failure(Failure(reason: "the request head left the connection undecided")) : .success(written)
    }
}
