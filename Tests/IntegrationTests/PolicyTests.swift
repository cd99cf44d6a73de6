// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveGateClient
import LiveGateProtocol
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The local access policy (peer credentials) and the per-connection limits, from the config file.
@Suite(.serialized) struct PolicyTests {
    /// Starts a cluster whose daemon reads `config`.
    func cluster(config: String) async throws -> TestCluster {
        let cluster = try await TestCluster.start(startDaemon: false)
        try config.write(toFile: cluster.directory + "/livegated.conf", atomically: true, encoding: .utf8)
        try await cluster.startDaemon(extraArguments: ["--config", cluster.directory + "/livegated.conf"])
        return cluster
    }

    let me = getuid()
    let hello = #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"t","protocol":1}}"#

    @Test func aPeerOutsideTheAllowListIsRefusedAndLogged() async throws {
        let cluster = try await cluster(config: "allow-users = 65534\n")
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            let closing = try await raw.next()
            #expect(closing.contains(#""method":"connection.closing""#))
            #expect(closing.contains(#""code":-32002"#))
            #expect(closing.contains("uid \(me)"))
            await #expect(throws: (any Error).self) { try await raw.next(timeout: .seconds(5)) }
        }
        #expect(cluster.daemonLog.contains("client refused"))
        #expect(cluster.daemonLog.contains("message_id=a255f6108d6942c08251ad03fb1e5f90"))

        // The clients understand the refusal: a typed error from LiveGateClient (at once, not after its
        // timeout), livegatectl's message and exit code 77.
        let refusal = await #expect(throws: LiveGateError.self) {
            try await LiveGateClient.connect(socketPath: cluster.socketPath, client: "t", timeout: .seconds(30))
        }
        #expect(refusal?.kind == .refused && refusal?.code == .notPermitted, "\(String(describing: refusal))")
        #expect(refusal?.message.contains("livegated refused the connection: not permitted: uid \(me)") == true, "\(String(describing: refusal))")
        let ctl = try runToCompletion(TestCluster.binDirectory + "/livegatectl", ["status", "--socket", cluster.socketPath])
        #expect(ctl.status == 77, "\(ctl.output)")
        #expect(ctl.output.hasPrefix("livegatectl: livegated refused the connection: not permitted: uid \(me)"), "\(ctl.output)")

        // A reload that allows this user lets the next connection in.
        try "allow-users = 65534, \(me)\n".write(toFile: cluster.directory + "/livegated.conf", atomically: true, encoding: .utf8)
        cluster.signalDaemon(SIGHUP)
        try await eventually("the reloaded policy") { cluster.daemonLog.contains("configuration reloaded") }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(hello)
            #expect(try await raw.next().contains(#""result":{"daemon":"livegated""#))
        }
    }

    @Test func aReadOnlyPeerMayObserveButNotWrite() async throws {
        let cluster = try await cluster(config: "read-only-users = \(me)\n")
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            try await raw.send(#"{"jsonrpc":"2.0","id":1,"method":"object.observe","params":{"collection":"notes","id":"ro"}}"#)
            #expect(try await raw.next() == #"{"id":1,"jsonrpc":"2.0","result":{"token":1}}"#)
            try await raw.send(#"{"jsonrpc":"2.0","id":2,"method":"object.update","params":{"collection":"notes","id":"ro","data":{"a":1}}}"#)
            var answer = try await raw.next()
            while answer.contains(#""method":"object.changed""#) { answer = try await raw.next() }
            #expect(answer.hasPrefix(#"{"error":{"code":-32002,"#), "\(answer)")
            #expect(answer.contains("may only read"))
        }
    }

    @Test func refusedSubscriptionsLeaveNoTokenBehind() async throws {
        let cluster = try await cluster(config: "max-tokens-per-connection = 1\n")
        defer { cluster.stop() }
        // The cloud refuses a stream subscription once the daemon's realtime link is up to ask it.
        try await cluster.daemonRealtimeConnected()
        try await RawConnection.with(cluster.socketPath) { raw in
            // Refused by the cloud (no such stream), twice: neither counts against the one token allowed.
            for n in 1...2 {
                try await raw.send(#"{"jsonrpc":"2.0","id":\#(n),"method":"stream.listen","params":{"stream":"jazz"}}"#)
                let answer = try await raw.next()
                #expect(answer.hasPrefix(#"{"error":{"code":-32006,"#), "\(answer)")
            }
            try await raw.send(#"{"jsonrpc":"2.0","id":3,"method":"token.invalidate","params":{"token":1}}"#)
            let invalidated = try await raw.next()
            #expect(invalidated.hasPrefix(#"{"error":{"code":-32001,"#), "a refused token does not exist: \(invalidated)")
            try await raw.send(#"{"jsonrpc":"2.0","id":4,"method":"object.observe","params":{"collection":"notes","id":"after"}}"#)
            let observed = try await raw.next()
            #expect(observed == #"{"id":4,"jsonrpc":"2.0","result":{"token":3}}"#, "\(observed)")
        }
    }

    @Test func tokenConnectionAndRateLimitsAreErrorsNotCrashes() async throws {
        let cluster = try await cluster(config: "max-tokens-per-connection = 2\nmax-connections = 1\nmax-requests-per-second = 5\n")
        defer { cluster.stop() }
        try await RawConnection.with(cluster.socketPath) { raw in
            for n in 1...3 {
                try await raw.send(#"{"jsonrpc":"2.0","id":\#(n),"method":"object.observe","params":{"collection":"notes","id":"t\#(n)"}}"#)
            }
            var answers: [String] = []
            while answers.count < 3 {
                let line = try await raw.next()
                if line.hasPrefix(#"{"error""#) || line.contains(#""result""#) { answers.append(line) }
            }
            #expect(answers[2].hasPrefix(#"{"error":{"code":-32003,"data":{"limit":"maxTokensPerConnection"}"#), "\(answers[2])")

            // A second connection is one too many.
            try await RawConnection.with(cluster.socketPath) { second in
                let closing = try await second.next()
                #expect(closing.contains(#""method":"connection.closing""#) && closing.contains(#""code":-32003"#))
            }

            // A burst past the rate: the excess is refused, the rest answered, the connection stays.
            var burst = ""
            for n in 10..<30 { burst += #"{"jsonrpc":"2.0","id":\#(n),"method":"hello","params":{"client":"t","protocol":1}}"# + "\n" }
            try await raw.sendBytes(.init(string: burst))
            var refused = 0
            var answered = 0
            while refused + answered < 20 {
                let line = try await raw.next()
                if line.contains(#""limit":"maxRequestsPerSecond""#) {
                    refused += 1
                } else if line.contains(#""daemon":"livegated""#) {
                    answered += 1
                }
            }
            #expect(refused > 0)
            #expect(answered >= 1)
        }
    }
}
