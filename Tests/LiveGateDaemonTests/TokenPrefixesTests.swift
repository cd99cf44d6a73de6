// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import LiveGateProtocol
import NIOCore
import Testing

@Suite struct TokenPrefixesTests {
    private static func address(_ buffer: ByteBuffer) -> UInt {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
    }

    private static func expected(_ token: Int64) -> ByteBuffer {
        NotificationFrame.prefix(method: NotificationMethod.objectChanged, token: token)
    }

    @Test func tokensInOrderGetTheFramesPrefixFromSharedBlocks() {
        let prefixes = TokenPrefixes(method: NotificationMethod.objectChanged)
        // All kept (as the tokens would keep them), so no block's memory is given back and used again.
        let all = (Int64(1)...3_000).map { prefixes.prefix(token: $0) }
        for (index, prefix) in all.enumerated() { #expect(prefix == Self.expected(Int64(index + 1)), "token \(index + 1)") }
        // A token's prefix follows the one before it in the same memory, or starts a new block.
        let blocks = 1 + zip(all, all.dropFirst()).filter { Self.address($1) != Self.address($0) + UInt($0.readableBytes) }.count
        // About 32 prefixes (61-64 bytes) in a 2 KiB block: a hundred blocks, not three thousand buffers.
        #expect((90...110).contains(blocks), "\(blocks) blocks for 3,000 tokens")
    }

    @Test func tokensOutOfOrderAndAcrossDigitCountsGetTheFramesPrefix() {
        let prefixes = TokenPrefixes(method: NotificationMethod.objectChanged)
        var random = SystemRandomNumberGenerator()
        var tokens: [Int64] = [1, 9, 10, 99, 100, 999, 1_000, 9_999, 10_000, 5, 5, 2, Int64.max - 1, Int64.max, 7]
        for _ in 0..<500 { tokens.append(Int64.random(in: 1...20_000, using: &random)) }
        for token in tokens { #expect(prefixes.prefix(token: token) == Self.expected(token), "token \(token)") }
    }

    @Test func aPrefixOutlivesItsBlockBeingReplaced() {
        let prefixes = TokenPrefixes(method: NotificationMethod.collectionChanged)
        let kept = prefixes.prefix(token: 1)
        for token in Int64(1_000)...1_200 { _ = prefixes.prefix(token: token) }
        #expect(String(buffer: kept) == String(buffer: NotificationFrame.prefix(method: NotificationMethod.collectionChanged, token: 1)))
    }
}
