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
}
