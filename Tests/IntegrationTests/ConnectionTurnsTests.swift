// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON
import NIOCore
import Testing

/// With default settings, an app's burst at start is served whole, and other connections are served in
/// turns beside it (Protocol/ipc, *Turns, not a rate*). How fast is measured by `livegate-bench`.
@Suite(.serialized) struct ConnectionTurnsTests {
    static let burst = 10_000

    /// 10,000 `object.observe` written at once, as an app that does not wait for answers does.
    static var observes: String {
        var text = ""
        for n in 1...burst {
            text += #"{"jsonrpc":"2.0","id":\#(n),"method":"object.observe","params":{"collection":"notes","id":"n\#(n)"}}"# + "\n"
        }
        return text
    }

    @Test func tenThousandObservesAtOnceAreAllAnsweredAndLoadedWithDefaultSettings() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        _ = try await cluster.put("notes", "n1", ["text": "one"], token: try await cluster.login())
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.sendBytes(.init(string: Self.observes))
            let (tokens, refused, loaded) = try await withTimeout(.seconds(300), "\(Self.burst) observations answered and loaded") {
                var tokens = 0
                var refused: [String] = []
                var loaded = 0
                while tokens + refused.count < Self.burst || loaded < tokens {
                    let line = try await raw.next(timeout: .seconds(60))
                    if line.hasPrefix(#"{"error""#) {
                        refused.append(line)
                    } else if line.contains(#""result":{"token""#) {
                        tokens += 1
                    } else if line.contains(#""loadingStatus":"loaded""#) {
                        loaded += 1
                    }
                }
                return (tokens, refused, loaded)
            }
            #expect(refused.isEmpty, "\(refused.count) refused, the first: \(refused.first ?? "")")
            #expect(tokens == Self.burst && loaded == Self.burst)
        }
    }

    @Test func anotherConnectionIsServedDuringABurstNotAfterIt() async throws {
        let cluster = try await TestCluster.start()
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { busy in
            try await RawConnection.with(cluster.socketPath) { other in
                try await busy.sendBytes(.init(string: Self.observes))
                while try await !busy.next().contains(#""result":{"token""#) {}
                // Asked once the burst is being served, the other connection's answer comes while the burst's
                // answers (two lines an observation: the token and its first state, at least) still arrive.
                try await other.send(#"{"jsonrpc":"2.0","id":"beside","method":"session.state"}"#)
                let beside = try await other.next()
                let burstLinesBefore = busy.received.value
                #expect(beside.hasPrefix(#"{"id":"beside","jsonrpc":"2.0","result":"#), "\(beside)")
                #expect(burstLinesBefore < Self.burst, "the burst had \(burstLinesBefore) lines in before the other's answer")
            }
        }
    }
}
