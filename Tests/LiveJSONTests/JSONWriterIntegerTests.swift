// Licensed under the Apache License, Version 2.0.

import LiveJSON
import SeededRandom
import Testing

/// Integers written digit by digit (`JSONWriter.write(_: Int64)`): the same text as `String(_:)`, for every
/// magnitude and sign, through each of the writer's ways in (an `Int64`, an `Int`, any other integer type, a
/// `JSONValue` number that is integral).
@Suite struct JSONWriterIntegerTests {
    static func written(_ write: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter()
        write(&writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    @Test func edgesAreWrittenAsStringWritesThem() {
        var edges: [Int64] = [.min, .min + 1, .max, .max - 1, 0, 1, -1, 9, 10, -9, -10, 99, 100, -100]
        for exponent in 1...18 {
            let power = (0..<exponent).reduce(Int64(1)) { product, _ in product * 10 }
            edges += [power - 1, power, power + 1, -power + 1, -power, -power - 1]
        }
        for value in edges {
            #expect(Self.written { $0.write(value) } == String(value))
            #expect(Self.written { $0.write(Int(value)) } == String(value))
            #expect(Self.written { $0.write(Int32(truncatingIfNeeded: value)) } == String(Int32(truncatingIfNeeded: value)))
        }
        #expect(Self.written { $0.write(UInt64.max) } == String(UInt64.max))
        #expect(Self.written { $0.write(UInt8(255)) } == "255")
    }

    @Test func randomIntegersOfEveryLengthAreWrittenAsStringWritesThem() {
        var random = SeededGenerator(seed: 20_261_129)
        for _ in 0..<20_000 {
            // A random number of significant bits, so every length of digits comes up as often.
            let bits = Int.random(in: 0...63, using: &random)
            let magnitude = Int64.random(in: 0...(bits == 63 ? Int64.max : (Int64(1) << bits)), using: &random)
            let value = Bool.random(using: &random) ? -magnitude : magnitude
            #expect(Self.written { $0.write(value) } == String(value))
            if abs(value) < 9_007_199_254_740_992 {
                #expect(Self.written { try! $0.write(JSONValue.integer(value)) } == String(value))
            }
        }
    }
}
