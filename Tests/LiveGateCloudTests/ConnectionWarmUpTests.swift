// Licensed under the Apache License, Version 2.0.

import HummingbirdWebSocket
import LiveGateCloud
import Logging
import Testing

@Suite struct ConnectionWarmUpTests {
    /// The cloud sets up a plain-HTTP connection and a WebSocket upgrade before it accepts any, so that its
    /// event loops never instantiate a connection's generic types for the first time at once (see
    /// ConnectionWarmUp). Both must get all the way through: an upgrade that stayed undecided would leave the
    /// upgrade's types to the first real connection.
    @Test func aPlainConnectionAndAnUpgradeAreSetUpAheadOfTheServer() {
        let outcome = ConnectionWarmUp.run(configuration: .init(), logger: Logger(label: "warm-up-test"))
        #expect(outcome == .done)
    }
}
