// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import Testing

/// The daemon and every client find the socket by the same rule.
@Suite struct DaemonSocketTests {
    @Test func theEnvironmentElseTheSystemSocket() {
        #expect(DaemonSocket.defaultPath(environment: [:]) == "/run/livegate/livegate.sock")
        #expect(DaemonSocket.defaultPath(environment: ["LIVEGATE_SOCKET": "/tmp/x.sock"]) == "/tmp/x.sock")
        #expect(DaemonSocket.defaultPath(environment: ["LIVEGATE_SOCKET": ""]) == "/run/livegate/livegate.sock", "empty is unset")
        // Not a per-user rule: a user's runtime directory does not move the socket (it did for the daemon only).
        #expect(DaemonSocket.defaultPath(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]) == "/run/livegate/livegate.sock")
    }
}
