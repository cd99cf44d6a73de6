// Licensed under the Apache License, Version 2.0.

import NIOCore

/// Notification bodies, each encoded once for many tokens, stored one after another in one buffer: what one
/// fan-out task on an event loop offers its tokens. One allocation and one reference for all of them, and the
/// bytes are this loop's own (no reference count shared with another thread). A client that keeps up gets the
/// bytes copied from here into its chunks; a slow one queues a copy of one body (``body(at:)``). Nothing else
/// keeps a reference to the storage: it is freed once offered, or filled again by the task's next batch.
package struct SharedBodies {
    package private(set) var bytes: ByteBuffer
    /// Where each body is in `bytes`' readable bytes.
    private(set) var ranges: [Range<Int>] = []

    package init(capacity: Int = 4 << 10) {
        bytes = ByteBufferAllocator().buffer(capacity: capacity)
    }

    var count: Int { ranges.count }

    package mutating func append(_ body: ByteBuffer) {
        let start = bytes.readableBytes
        _ = body.withUnsafeReadableBytes { bytes.writeBytes($0) }
        ranges.append(start..<bytes.readableBytes)
    }

    /// The body at `position`, copied into a buffer of its own: what a client that is behind keeps queued. (A
    /// slice would keep the whole batch's storage alive with it, unaccounted for: a thousand slow clients each
    /// holding one body of a different batch held a thousand batches.)
    package func body(at position: Int) -> ByteBuffer {
        let range = ranges[position]
        return bytes.withUnsafeReadableBytes { all in
            var body = ByteBufferAllocator().buffer(capacity: range.count)
            body.writeBytes(UnsafeRawBufferPointer(rebasing: all[range]))
            return body
        }
    }

    /// Empties it, keeping the capacity when nothing else refers to the storage.
    package mutating func removeAll() {
        bytes.clear()
        ranges.removeAll(keepingCapacity: true)
    }
}
