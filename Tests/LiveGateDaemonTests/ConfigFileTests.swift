// Licensed under the Apache License, Version 2.0.

import LiveSDK
import NIOCore
import Testing

@testable import LiveGateDaemon

@Suite struct ConfigFileTests {
    @Test func eventLoopsIsACountOrAuto() throws {
        #expect(try ConfigFile.parse("event-loops = 3\n", source: "f").eventLoops == 3)
        #expect(try ConfigFile.parse("event-loops = auto\n", source: "f").eventLoops == nil)
        #expect(try ConfigFile.parse("", source: "f").eventLoops == nil)
        for bad in ["0", "257", "two", "-1"] {
            let error = #expect(throws: ConfigError.self) { try ConfigFile.parse("event-loops = \(bad)\n", source: "f") }
            #expect(error?.description == "f:1: event-loops must be a whole number from 1 to 256, not \(bad) (or auto)")
        }
    }

    @Test func theDefaultLeavesTheEngineACoreAndIsAtLeastOne() {
        #expect(DaemonConfiguration.defaultEventLoops >= 1)
        #expect(DaemonConfiguration.defaultEventLoops <= max(1, System.coreCount - 1))
        let configuration = DaemonConfiguration(
            socketPath: "/tmp/s",
            stateDirectory: "/tmp/d",
            eventLoops: 0,
            cloudURL: "http://127.0.0.1:1",
            credentials: .init(username: "u", password: "p")
        )
        #expect(configuration.eventLoops == 1, "fewer than one loop is one")
    }
}
