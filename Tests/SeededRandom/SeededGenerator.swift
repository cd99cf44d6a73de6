// Licensed under the Apache License, Version 2.0.

/// SplitMix64: a small generator of reproducible random values for the tests, so a failing schedule or input
/// can be run again from its seed. Shared by every test target (one copy of it, not one per target).
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
