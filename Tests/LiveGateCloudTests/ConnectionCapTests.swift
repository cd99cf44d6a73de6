// Licensed under the Apache License, Version 2.0.

import LiveGateCloud
import NIOCore
import NIOEmbedded
import Testing

/// Beyond its limit the cap closes the connection idle longest, never a realtime WebSocket or one whose request
/// is being answered, and refuses the new one when every connection is busy.
@Suite struct ConnectionCapTests {
    /// A connected channel (an `EmbeddedChannel` is inactive until connected).
    func connection() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func oneMoreConnectionClosesTheOneIdleLongest() throws {
        let cap = ConnectionCap(limit: 3)
        let start = NIODeadline.now()
        let (a, b, c) = (try connection(), try connection(), try connection())
        #expect(cap.admit(a, now: start) == .admitted)
        #expect(cap.admit(b, now: start + .seconds(1)) == .admitted)
        #expect(cap.admit(c, now: start + .seconds(2)) == .admitted)
        // a asked something and was answered at 5 s; b said nothing since 1 s; c asked at 6 s and waits.
        cap.read(a, now: start + .seconds(5))
        cap.wrote(a)
        cap.read(c, now: start + .seconds(6))
        let d = try connection()
        #expect(cap.admit(d, now: start + .seconds(7)) == .admittedInPlaceOfIdle)
        #expect(b.isActive == false, "b, idle longest, was closed")
        #expect(a.isActive && c.isActive)
        #expect(cap.counts.open == 3 && cap.counts.closedForRoom == 1)
    }

    @Test func aRealtimeConnectionOrABusyOneNeverGivesWayAndWithNoneIdleTheNewOneIsRefused() throws {
        let cap = ConnectionCap(limit: 2)
        let start = NIODeadline.now()
        let (realtime, busy) = (try connection(), try connection())
        #expect(cap.admit(realtime, now: start) == .admitted)
        #expect(cap.admit(busy, now: start + .seconds(1)) == .admitted)
        cap.markRealtime(realtime)
        cap.read(busy, now: start + .seconds(2))
        #expect(cap.admit(try connection(), now: start + .seconds(3)) == .refused)
        #expect(realtime.isActive && busy.isActive)
        cap.wrote(busy)  // answered: idle now
        let next = try connection()
        #expect(cap.admit(next, now: start + .seconds(4)) == .admittedInPlaceOfIdle)
        #expect(!busy.isActive && realtime.isActive)
        cap.closed(next)
        #expect(cap.counts == (open: 1, closedForRoom: 1, refused: 1))
    }
}
