// Licensed under the Apache License, Version 2.0.

import NIOCore

/// Buffers an event loop's connections copy their bytes into, used again once written.
///
/// A connection's outbox copies what it queues into chunks (``ConnectionOutbox``), and its writer hands them
/// to the socket. Allocated fresh each time, a chunk's memory was mostly pages the allocator had just given
/// back to the kernel, so writing into it faulted and zeroed each page again (a sixth of the daemon's time at
/// 1,000 subscribers). The writer returns its chunks here after writing them, and the loop's outboxes take
/// them again. Confined to the loop; bounded, so a burst's chunks are not all kept.
package final class ChunkPool: Sendable {
    private struct Spares {
        var small: [ByteBuffer] = []
        var large: [ByteBuffer] = []
        var bytes = 0
    }

    /// At most this many bytes of chunks are kept.
    let maxBytes: Int
    private let spares: NIOLoopBoundBox<Spares>

    package init(eventLoop: any EventLoop, maxBytes: Int = 4 << 20) {
        self.maxBytes = maxBytes
        spares = .makeBoxSendingValue(Spares(), eventLoop: eventLoop)
    }

    /// An empty chunk with room for at least `capacity` bytes, when one of that size is spare; on the loop.
    package func take(capacity: Int) -> ByteBuffer? {
        spares.withValue { spares -> ByteBuffer? in
            // Each size for its own use: a large chunk taken for a small need would be kept as long.
            let chunk: ByteBuffer? =
                if capacity <= ConnectionOutbox.firstChunkBytes {
                    Self.popCleared(&spares.small)
                } else if capacity <= ConnectionOutbox.chunkBytes {
                    Self.popCleared(&spares.large)
                } else {
                    nil
                }
            if let chunk { spares.bytes -= chunk.capacity }
            return chunk
        }
    }

    /// The last of `chunks`, emptied: with its memory when nothing else holds it (one more copy of it, even a
    /// local, would make `clear` allocate), with new memory when the socket still does.
    private static func popCleared(_ chunks: inout [ByteBuffer]) -> ByteBuffer? {
        guard var chunk = chunks.popLast() else { return nil }
        chunk.clear()
        return chunk
    }

    /// Keeps `chunks` for ``take(capacity:)``, as many as fit in `maxBytes`; on the loop. Chunks of other
    /// sizes than the outboxes' two are left to be freed.
    package func recycle(_ chunks: [ByteBuffer]) {
        spares.withValue { spares in
            for chunk in chunks where spares.bytes + chunk.capacity <= maxBytes {
                if chunk.capacity == Self.smallCapacity {
                    spares.small.append(chunk)
                } else if chunk.capacity == Self.largeCapacity {
                    spares.large.append(chunk)
                } else {
                    continue
                }
                spares.bytes += chunk.capacity
            }
        }
    }

    /// The capacities the allocator gives the outboxes' two sizes of chunk.
    private static let smallCapacity = ByteBufferAllocator().buffer(capacity: ConnectionOutbox.firstChunkBytes).capacity
    private static let largeCapacity = ByteBufferAllocator().buffer(capacity: ConnectionOutbox.chunkBytes).capacity
}
