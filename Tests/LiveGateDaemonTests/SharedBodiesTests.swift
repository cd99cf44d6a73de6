// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import Testing

@Suite struct SharedBodiesTests {
    private static func address(_ buffer: ByteBuffer) -> UInt {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func aBodyTakenOutHoldsNoReferenceToTheBatch() {
        var bodies = SharedBodies()
        bodies.append(ByteBuffer(string: "first"))
        bodies.append(ByteBuffer(string: "second"))
        let kept = bodies.body(at: 1)
        #expect(String(buffer: kept) == "second")
        let batch = Self.address(bodies.bytes)..<Self.address(bodies.bytes) + UInt(bodies.bytes.readableBytes)
        #expect(!batch.contains(Self.address(kept)), "the body is a slice of the batch's storage")
        // Nothing else refers to the batch's storage: emptied and filled again, it is the same memory (a slice
        // still held would have made emptying it allocate anew, and kept the old batch alive).
        bodies.removeAll()
        bodies.append(ByteBuffer(string: "third"))
        #expect(Self.address(bodies.bytes) == batch.lowerBound)
        #expect(String(buffer: kept) == "second")
        #expect(String(buffer: bodies.body(at: 0)) == "third")
    }

    /// The first body of a batch taken as it is: no copy, and what follows it goes into storage of the batch's own,
    /// leaving the body's holder as it was.
    @Test func anAdoptedBodyIsNotCopiedAndNeverWrittenTo() {
        let body = ByteBuffer(string: "first")
        var bodies = SharedBodies()
        bodies.append(body, adopting: true)
        #expect(Self.address(bodies.bytes) == Self.address(body), "taken as it is")
        #expect(String(buffer: bodies.body(at: 0)) == "first")
        bodies.append(ByteBuffer(string: "second"), adopting: true)
        #expect(String(buffer: bodies.body(at: 0)) == "first")
        #expect(String(buffer: bodies.body(at: 1)) == "second")
        #expect(Self.address(bodies.bytes) != Self.address(body), "the second body is not written into the first's storage")
        #expect(String(buffer: body) == "first")
        bodies.removeAll()
        bodies.append(ByteBuffer(string: "third"))
        #expect(String(buffer: bodies.body(at: 0)) == "third")
        #expect(String(buffer: body) == "first")
    }

    /// A batch that was never given a body allocates nothing.
    @Test func anEmptyBatchAllocatesNothing() {
        let bodies = SharedBodies()
        #expect(bodies.bytes.capacity == 0)
    }
}
