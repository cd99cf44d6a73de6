// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import NIOEmbedded
import Testing

@Suite struct AcceptedConnectionsTests {
    @Test func aConnectionIsHeldUntilTakenAndStopHandsOverTheRestAndRefusesMore() throws {
        let accepted = AcceptedConnections<String>()
        let first = EmbeddedChannel()
        let second = EmbeddedChannel()
        let third = EmbeddedChannel()
        #expect(try accepted.admit(first) { "first" } == "first")
        #expect(try accepted.admit(second) { "second" } == "second")
        #expect(accepted.waitingCount == 2)
        #expect(accepted.take(first))
        #expect(!accepted.take(first), "taken once")
        // What was admitted and never taken goes to whoever stops the server, to be closed.
        #expect(accepted.stop() == ["second"])
        #expect(!accepted.take(second))
        var made = false
        #expect(throws: AcceptedConnections<String>.Stopped.self) {
            try accepted.admit(third) {
                made = true
                return "third"
            }
        }
        #expect(!made, "after stop nothing is made to be dropped")
        #expect(accepted.waitingCount == 0)
    }

    @Test func aConnectionThatFailsToBeMadeIsNotHeld() {
        let accepted = AcceptedConnections<String>()
        struct Failed: Error {}
        #expect(throws: Failed.self) { try accepted.admit(EmbeddedChannel()) { throw Failed() } }
        #expect(accepted.waitingCount == 0)
    }
}
