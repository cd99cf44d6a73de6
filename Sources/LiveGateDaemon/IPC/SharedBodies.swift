// Licensed under the Apache License, Version 2.0.

import NIOCore

/// Notification bodies, each encoded once for many tokens, stored one after another in one buffer: what one
/// fan-out task on an event loop offers its tokens. One allocation and one reference for all of them, and the
/// bytes are this loop's own (no reference count shared with another thread). A client that keeps up gets the
/// bytes copied from here into its chunks; a slow one queues a copy of one body (``body(at:)``). Nothing else
/// keeps a reference to the storage: it is freed once offered, or filled again by the task's next batch.
///
/// Nothing is allocated until a body comes (a task that only adds or removes tokens offers none), and the first
/// body's place is kept inline: a task with one change, the usual one, allocates no array of places. A task whose
/// loop has few tokens on the topic takes the first body's buffer as it is (``append(_:adopting:)``) instead of
/// copying it: the copy is what keeps the reference counts of a body offered to many tokens on this thread alone,
/// and a few tokens count it a few times.
package struct SharedBodies {
    package private(set) var bytes: ByteBuffer
    /// Where each body is in `bytes`' readable bytes: the first, then the others.
    private var first: Range<Int>?
    private var others: [Range<Int>] = []
    private let capacity: Int

    /// `capacity`: what the buffer holds before it grows, allocated when the first body is copied in.
    package init(capacity: Int = 4 << 10) {
        bytes = ByteBuffer()
        self.capacity = capacity
    }

    /// One body, taken as it is.
    package init(holding body: ByteBuffer) {
        self.init()
        append(body, adopting: true)
    }

    var count: Int { first == nil ? 0 : 1 + others.count }

    /// Where the body at `position` is in `bytes`' readable bytes.
    func range(at position: Int) -> Range<Int> {
        position == 0 ? first! : others[position - 1]
    }

    /// Adds `body` after the others, copied into this batch's buffer; the first one of a batch whose buffer was
    /// never allocated is taken as it is when `adopting` (no copy: its storage is then shared with whoever else
    /// holds `body`, and a later body appended copies both into storage of this batch's own).
    package mutating func append(_ body: ByteBuffer, adopting: Bool = false) {
        if adopting, first == nil, bytes.capacity == 0 {
            bytes = body
            first = 0..<body.readableBytes
            return
        }
        if bytes.capacity == 0 { bytes.reserveCapacity(max(capacity, body.readableBytes)) }
        let start = bytes.readableBytes
        _ = body.withUnsafeReadableBytes { bytes.writeBytes($0) }
        let range = start..<bytes.readableBytes
        if first == nil { first = range } else { others.append(range) }
    }

    /// The body at `position`, copied into a buffer of its own: what a client that is behind keeps queued. (A
    /// slice would keep the whole batch's storage alive with it, unaccounted for: a thousand slow clients each
    /// holding one body of a different batch held a thousand batches.)
    package func body(at position: Int) -> ByteBuffer {
        let range = range(at: position)
        return bytes.withUnsafeReadableBytes { all in
            var body = ByteBufferAllocator().buffer(capacity: range.count)
            body.writeBytes(UnsafeRawBufferPointer(rebasing: all[range]))
            return body
        }
    }

    /// Empties it, keeping the capacity when nothing else refers to the storage (an adopted body's buffer, still
    /// held by whoever made it, is let go: the next body is copied into a buffer of this batch's own).
    package mutating func removeAll() {
        if bytes.modifyIfUniquelyOwned({ $0.clear() }) == nil { bytes = ByteBuffer() }
        first = nil
        others.removeAll(keepingCapacity: true)
    }
}
