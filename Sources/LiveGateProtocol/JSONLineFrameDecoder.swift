// Licensed under the Apache License, Version 2.0.

import NIOCore

/// One inbound frame of the local protocol.
public enum InboundFrame: Sendable, Equatable {
    /// One line without its `\n` (and without a trailing `\r`), as a slice of the read buffer.
    case message(ByteBuffer)
    /// A line longer than the limit. Its bytes are discarded up to the next `\n`, after which frames resume;
    /// `byteCount` is how many bytes had arrived when the limit was crossed.
    case oversized(byteCount: Int)
}

/// Splits a byte stream into `\n`-terminated frames of at most `maxFrameBytes` bytes (the `\n` included).
///
/// Unlike NIO's `LineBasedFrameDecoder`, it never buffers more than the limit: a longer line is reported
/// once as ``InboundFrame/oversized(byteCount:)`` and skipped, so the connection stays usable. Empty lines
/// are ignored. A partial line at end of stream is dropped (the peer is gone; nobody is left to answer).
public struct JSONLineFrameDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = InboundFrame

    public let maxFrameBytes: Int
    private var lastScanOffset = 0
    private var discarding = false

    public init(maxFrameBytes: Int) {
        precondition(maxFrameBytes >= 2, "a frame needs at least one byte and the newline")
        self.maxFrameBytes = maxFrameBytes
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = self.nextFrame(&buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(frame))
        return .continue
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        while let frame = self.nextFrame(&buffer) {
            context.fireChannelRead(Self.wrapInboundOut(frame))
        }
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }

    /// The framing itself, free of channel plumbing so it can be tested directly.
    public mutating func nextFrame(_ buffer: inout ByteBuffer) -> InboundFrame? {
        while true {
            if discarding {
                guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
                    buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
                    return nil
                }
                buffer.moveReaderIndex(to: newline + 1)
                discarding = false
                continue
            }
            let view = buffer.readableBytesView.dropFirst(lastScanOffset)
            if let newline = view.firstIndex(of: UInt8(ascii: "\n")) {
                let length = newline - buffer.readerIndex
                lastScanOffset = 0
                if length + 1 > maxFrameBytes {
                    buffer.moveReaderIndex(forwardBy: length + 1)
                    return .oversized(byteCount: length + 1)
                }
                var line = buffer.readSlice(length: length)!
                buffer.moveReaderIndex(forwardBy: 1)
                if line.readableBytesView.last == UInt8(ascii: "\r") {
                    line = line.getSlice(at: line.readerIndex, length: line.readableBytes - 1)!
                }
                if line.readableBytes == 0 { continue }
                return .message(line)
            }
            if buffer.readableBytes >= maxFrameBytes {
                // No newline within the limit: report once, then skip until the next newline.
                let count = buffer.readableBytes
                buffer.moveReaderIndex(forwardBy: count)
                lastScanOffset = 0
                discarding = true
                return .oversized(byteCount: count)
            }
            lastScanOffset = buffer.readableBytes
            return nil
        }
    }
}
