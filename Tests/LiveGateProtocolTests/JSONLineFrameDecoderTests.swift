// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Testing

@Suite struct JSONLineFrameDecoderTests {
    /// Feeds `chunks` through a decoder and collects the frames, as the channel handler would.
    private func frames(_ chunks: [String], max: Int = 16) -> [String] {
        var decoder = JSONLineFrameDecoder(maxFrameBytes: max)
        var buffer = ByteBuffer()
        var out: [String] = []
        for chunk in chunks {
            buffer.writeString(chunk)
            while let frame = decoder.nextFrame(&buffer) {
                switch frame {
                case .message(let line): out.append(String(buffer: line))
                case .oversized(let count): out.append("<oversized \(count)>")
                }
            }
            buffer.discardReadBytes()
        }
        return out
    }

    @Test func splitsLinesAndStripsCarriageReturns() {
        #expect(frames(["{\"a\":1}\n{\"b\":2}\r\n"]) == ["{\"a\":1}", "{\"b\":2}"])
    }

    @Test func ignoresEmptyLines() {
        #expect(frames(["\n\n{}\n\r\n"]) == ["{}"])
    }

    @Test func reassemblesLinesSplitAcrossReads() {
        let text = "{\"x\":\"abc\"}\n{\"y\":1}\n"
        let oneByteAtATime = text.map { String($0) }
        #expect(frames(oneByteAtATime) == ["{\"x\":\"abc\"}", "{\"y\":1}"])
    }

    @Test func reportsAnOversizedLineOnceAndResyncs() {
        let long = String(repeating: "x", count: 40)
        #expect(frames(["{\"ok\":1}\n", long, long, "\n{\"ok\":2}\n"]) == ["{\"ok\":1}", "<oversized 40>", "{\"ok\":2}"])
    }

    @Test func reportsAnOversizedCompleteLine() {
        let line = String(repeating: "y", count: 20) + "\n"
        #expect(frames([line + "{}\n"]) == ["<oversized 21>", "{}"])
    }

    @Test func acceptsALineOfExactlyTheLimit() {
        let line = String(repeating: "z", count: 15)  // 15 bytes + newline = 16 = the limit
        #expect(frames([line + "\n"]) == [line])
    }

    @Test func keepsAPartialLineUntilItsNewline() {
        #expect(frames(["{\"par", "tial\""]) == [])
    }
}
