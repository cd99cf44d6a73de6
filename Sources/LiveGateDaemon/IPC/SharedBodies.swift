// Licensed under the Apache License, Version 2.0.

import NIOCore

/// Notification bodies, each encoded once for many tokens, stored one after another in one buffer: what one
/// fan-out task on an event loop offers its tokens. One allocation and one reference for all of them, and the
/// bytes are this loop's own (no reference count shared with another thread). A client that keeps up gets the
/// bytes copied from here; a slow one queues a slice (``body(at:)``), which shares the storage.
struct SharedBodies {
    private(set) var bytes: ByteBuffer
    /// Where each body is in `bytes`' readable bytes.
    private(set) var ranges: [Range<Int>] = []

    init(capacity: Int = 4 << 10) {
        bytes = ByteBufferAllocator().buffer(capacity: capacity)
    }

    var count: Int { ranges.count }

    mutating func append(_ body: ByteBuffer) {
        let start = bytes.readableBytes
        _ = body.withUnsafeReadableBytes { bytes.writeBytes($0) }
        ranges.append(start..<bytes.readableBytes)
    }

    /// The body at `position`, as a buffer sharing this one's storage.
    func body(at position: Int) -> ByteBuffer {
        let range = ranges[position]
        // In range by construction: `ranges` only holds what `append` wrote.
        return bytes.getSlice(at: bytes.readerIndex + range.lowerBound, length: range.count)!
    }

    /// Empties it, keeping the capacity when nothing else refers to the storage.
    mutating func removeAll() {
        bytes.clear()
        ranges.removeAll(keepingCapacity: true)
    }
}
