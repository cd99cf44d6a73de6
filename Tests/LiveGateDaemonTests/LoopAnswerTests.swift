// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import LiveGateProtocol
import NIOCore
import Testing

@Suite struct LoopAnswerTests {
    /// A token's answer written on the loop is the line the protocol's encoder writes, over integer ids across
    /// their range (the only ones written there: ``ClientConnection``).
    @Test func aTokensAnswerIsTheEncodersLine() throws {
        var ids: [Int64] = [0, 1, -1, .max, .min]
        // Spread over the range (a fixed walk, so a failure replays).
        var walk: Int64 = 0x5EED
        for _ in 0..<200 {
            walk = walk &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            ids.append(walk >> Int64(walk & 63))
        }
        var token: Int64 = 7
        for id in ids {
            token = token &* 2_862_933_555_777_941_757 &+ 3_037_000_493
            let expected = try WireJSON.bytes(RPCResponse(id: .number(id), result: TokenResult(token: token))) + Array("\n".utf8)
            let line = LoopAnswer.token(token, id: id).bytes()
            #expect(Array(line.readableBytesView) == expected, "id \(id), token \(token)")
        }
    }

    @Test func aLineIsQueuedAsItIs() {
        #expect(LoopAnswer.line(ByteBuffer(string: "made\n")).bytes() == ByteBuffer(string: "made\n"))
    }
}
