// Licensed under the Apache License, Version 2.0.

import Glibc
import LiveSDK
import NIOCore
import Testing

/// A cloud that cannot be reached is told in the system's words (`-32004`'s message is read by people).
struct CloudErrorReasonTests {
    @Test func aRefusedConnectionReadsAsTheSystemSaysIt() {
        let refused = IOError(errnoCode: ECONNREFUSED, reason: "connection reset (error set)")
        #expect(CloudClient.reason(refused) == "Connection refused")
        #expect(!CloudClient.reason(refused).contains("errno"))
        #expect(CloudClient.reason(ChannelError.connectTimeout(.seconds(1))) == "the connection timed out")
    }
}
