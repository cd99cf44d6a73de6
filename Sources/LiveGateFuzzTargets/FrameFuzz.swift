// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore

/// The frame decoder against a model of it: the first byte picks the frame limit (2-257 bytes), the second
/// the read sizes; the rest is the stream. Whatever the reads, the frames must be the model's: each complete
/// line (without `\n`, and a `\r` before it) as a message if it fits in the limit with its `\n`, else one
/// `oversized`; empty lines nothing; a partial last line nothing, or one `oversized` if it reached the limit.
enum FrameFuzz {
    static func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        guard bytes.count >= 2 else { return }
        let limit = Int(bytes[0]) + 2
        var readSize = Int(bytes[1] % 32) + 1
        let stream = Array(bytes[2...])

        var decoder = JSONLineFrameDecoder(maxFrameBytes: limit)
        var buffer = ByteBuffer()
        var frames: [Frame] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + readSize)
            buffer.writeBytes(stream[offset..<end])
            offset = end
            readSize = readSize % 31 + 1 + (readSize & 3)  // varies, stays within 1-35
            while let frame = decoder.nextFrame(&buffer) { frames.append(Frame(frame)) }
            if buffer.readerIndex > 4096 { buffer.discardReadBytes() }
        }
        let expected = model(stream, limit: limit)
        try check(frames == expected, "limit \(limit): frames \(frames), the model says \(expected)")
    }

    enum Frame: Equatable, CustomStringConvertible {
        case message([UInt8])
        case oversized

        init(_ frame: InboundFrame) {
            switch frame {
            case .message(let buffer): self = .message(Array(buffer.readableBytesView))
            case .oversized: self = .oversized
            }
        }

        var description: String {
            switch self {
            case .message(let bytes): "message(\(bytes.count) bytes)"
            case .oversized: "oversized"
            }
        }
    }

    static func model(_ stream: [UInt8], limit: Int) -> [Frame] {
        var frames: [Frame] = []
        var line: [UInt8] = []
        for byte in stream {
            guard byte == UInt8(ascii: "\n") else {
                line.append(byte)
                continue
            }
            if line.count + 1 > limit {
                frames.append(.oversized)
            } else {
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                if !line.isEmpty { frames.append(.message(line)) }
            }
            line = []
        }
        if line.count >= limit { frames.append(.oversized) }
        return frames
    }
}
