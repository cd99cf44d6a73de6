// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
import LiveGateDaemon
import LiveSDK
import NIOCore
import Testing

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

    @Test func realtimePingSecondsIsACount() throws {
        #expect(try ConfigFile.parse("realtime-ping-seconds = 5\n", source: "f").realtimePingSeconds == 5)
        #expect(try ConfigFile.parse("", source: "f").realtimePingSeconds == nil)
        for bad in ["0", "3601", "1.5", "soon"] {
            let error = #expect(throws: ConfigError.self) { try ConfigFile.parse("realtime-ping-seconds = \(bad)\n", source: "f") }
            #expect(error?.description == "f:1: realtime-ping-seconds must be a whole number from 1 to 3600, not \(bad)")
        }
    }

    @Test func socketModeIsOctalAndKeepsTheOwnerInAndSocketGroupResolves() throws {
        #expect(try ConfigFile.parse("socket-mode = 0660\n", source: "f").socketMode == 0o660)
        #expect(try ConfigFile.parse("socket-mode = 600\n", source: "f").socketMode == 0o600)
        #expect(try ConfigFile.parse("socket-mode = 0o666\n", source: "f").socketMode == 0o666)
        for bad in ["0888", "1777", "rw", "0400", ""] where !bad.isEmpty {
            #expect(throws: ConfigError.self) { try ConfigFile.parse("socket-mode = \(bad)\n", source: "f") }
        }
        #expect(try ConfigFile.parse("socket-group = 0\n", source: "f").socketGroup == 0)
        #expect(try ConfigFile.parse("socket-group = root\n", source: "f").socketGroup == 0)
        let error = #expect(throws: ConfigError.self) { try ConfigFile.parse("socket-group = no-such-group-here\n", source: "f") }
        #expect(error?.description.hasPrefix("f:1: socket-group: no group named no-such-group-here") == true, "\(String(describing: error))")
    }

    @Test func adminListsResolve() throws {
        let file = try ConfigFile.parse("admin-users = root, 4242\nadmin-groups = 0\n", source: "f")
        #expect(file.policy.adminUsers == [0, 4242])
        #expect(file.policy.adminGroups == [0])
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
