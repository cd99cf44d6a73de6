// Licensed under the Apache License, Version 2.0.

import AsyncHTTPClient
import NIOCore
import Synchronization

/// The engine's HTTP connections to the cloud: one `HTTPClient` (its pool), replaced by a fresh one when the
/// cloud went silent.
///
/// A network partition, a host that moved or a NAT that forgot the flow leaves the pooled connections open and
/// dead: nothing closes them, and each request that takes one waits out its whole timeout (10 s, 2 s for a
/// readability question) before the pool opens another. The realtime connection notices such silence (a ping
/// unanswered, a reset, a handshake never answered) and calls ``renew()``: later requests go out on new
/// connections, and the old client is shut down, which fails the requests still waiting on its connections at
/// once, as their timeout would have later: the engine retries reads and queued writes (a write with its
/// idempotency key, so it is applied once); a stream message or grant fails to its caller.
package final class CloudConnections: Sendable {
    private let current: Mutex<HTTPClient>

    package init() {
        current = Mutex(Self.makeClient())
    }

    /// The client to send the next request with.
    var client: HTTPClient { current.withLock { $0 } }

    /// Replaces the client with a fresh one and shuts the old one down: its idle connections are closed and
    /// its requests in flight fail (`HTTPClientError.cancelled`), as does one that took it just before.
    package func renew() {
        let fresh = Self.makeClient()
        let old = current.withLock { client in
            defer { client = fresh }
            return client
        }
        old.shutdown { _ in }
    }

    deinit {
        current.withLock { $0 }.shutdown { _ in }
    }

    /// A connection that cannot be made fails the request at once: the engine retries with its own backoff and
    /// tells observers meanwhile. (The default client retries a refused connection until its connect timeout,
    /// which kept observers `loading` for 10 s before they heard of the failure.) A connection attempt that gets
    /// no answer (the cloud's host unreachable) fails after 3 s. An idle connection is closed after 30 s. On the
    /// process's shared event loops, which shutting a client down leaves running.
    private static func makeClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(3)
        // Idle connections are let go well before the cloud closes them (its --idle-timeout, 60 s by default), so a
        // request is not sent on a connection the cloud is closing at that moment.
        configuration.connectionPool.idleTimeout = .seconds(30)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }
}
