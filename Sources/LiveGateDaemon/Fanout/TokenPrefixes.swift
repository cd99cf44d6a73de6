// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Synchronization

/// A connection's notification prefixes for one method (``NotificationFrame/prefix(method:token:allocator:)``),
/// written for a run of consecutive tokens at once into one buffer and handed out as slices of it.
///
/// A prefix is about 65 bytes; a buffer of its own would cost about three times that (NIO rounds a buffer's
/// capacity up to a power of two, and its storage object comes on top). A connection numbers its tokens in order (``ClientConnection/allocateToken()``), so when a
/// token falls outside the last block, a block of it and the tokens after it is written: as many as fit in
/// ``blockBytes`` (about 30). A slice keeps its block alive: a connection that keeps one token in thirty and
/// ends the others holds a block for each it keeps (2 KiB; its tokens are bounded by `maxTokensPerConnection`).
package final class TokenPrefixes: Sendable {
    /// A block's capacity: a power of two, which NIO would round up to anyway.
    static let blockBytes = 2048

    private struct Block {
        var first: Int64
        var buffer: ByteBuffer
        /// The offset after each token's prefix, from `first` on.
        var ends: [UInt16]

        func slice(_ token: Int64) -> ByteBuffer? {
            guard token >= first, token - first < Int64(ends.count) else { return nil }
            let index = Int(token - first)
            let start = index == 0 ? 0 : Int(ends[index - 1])
            return buffer.getSlice(at: buffer.readerIndex + start, length: Int(ends[index]) - start)
        }
    }

    private let method: String
    private let last = Mutex<Block?>(nil)

    /// Prefixes of `method`'s notifications (`object.changed`, say).
    package init(method: String) {
        self.method = method
    }

    /// The prefix of `token`'s notifications: the same bytes as ``NotificationFrame/prefix(method:token:allocator:)``.
    package func prefix(token: Int64) -> ByteBuffer {
        last.withLock { last in
            if let slice = last?.slice(token) { return slice }
            let block = makeBlock(from: token)
            last = block
            return block.slice(token)!
        }
    }

    private func makeBlock(from first: Int64) -> Block {
        var buffer = ByteBufferAllocator().buffer(capacity: Self.blockBytes)
        var ends: [UInt16] = []
        let most = NotificationFrame.maximumPrefixBytes(method: method)
        var token = first
        // The first always goes in (a prefix is far below a block's size), the rest while room for any is left.
        while ends.isEmpty || buffer.writableBytes >= most {
            NotificationFrame.writePrefix(method: method, token: token, to: &buffer)
            ends.append(UInt16(buffer.readableBytes))
            guard token < Int64.max else { break }
            token += 1
        }
        return Block(first: first, buffer: buffer, ends: ends)
    }
}
