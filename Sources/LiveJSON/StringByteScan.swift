// Licensed under the Apache License, Version 2.0.

/// Where a JSON string's bytes need more than copying, found eight bytes at a time: the parser looks for the
/// closing quote (or an escape, or a control character, which JSON refuses unescaped), the writer for the bytes it
/// must escape. A payload's strings are most of an event's bytes, and a byte at a time was most of their cost.
package enum StringByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The bytes of `word` (its first byte lowest) that are a control character (below 0x20), `"`, `\` or
    /// `extra`, each flagged by its high bit. Only the lowest flag is sure to be exact (a borrow may flag bytes
    /// after a flagged one), which is all a scan needs: each term's lowest flag is a byte it looks for.
    @inline(__always)
    static func flagged(_ word: UInt64, extra: UInt8) -> UInt64 {
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let other = word ^ (ones &* UInt64(extra))
        let control = (word &- ones &* 0x20) & ~word
        return (control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((other &- ones) & ~other)) & highBits
    }

    /// The first index at or after `start` whose byte is a control character, `"`, `\` or `extra` (`bytes.count`
    /// when none is), and whether a byte before it is not ASCII (its high bit set).
    @inline(__always)
    package static func firstFlagged(in bytes: UnsafeRawBufferPointer, from start: Int, extra: UInt8) -> (index: Int, nonASCII: Bool) {
        var index = start
        var high: UInt64 = 0
        while bytes.count - index >= 8 {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let flags = flagged(word, extra: extra)
            if flags != 0 {
                let at = flags.trailingZeroBitCount / 8
                // The bytes before the flagged one: the low `at` bytes.
                if at > 0 { high |= word & (UInt64.max >> (64 - 8 * at)) }
                return (index + at, high & highBits != 0)
            }
            high |= word
            index += 8
        }
        var nonASCII = high & highBits != 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == extra { break }
            if byte >= 0x80 { nonASCII = true }
            index += 1
        }
        return (index, nonASCII)
    }
}
