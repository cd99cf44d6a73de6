// Licensed under the Apache License, Version 2.0.

/// Exponential backoff with jitter, for reconnects and fetch retries.
public enum Backoff {
    /// 100 ms × 2^(attempt−1), at most 30 s, spread by ±20 % so that many hosts retrying after one cloud
    /// restart do not arrive together.
    /// - Parameter jitter: a random number in `0..<1` (injected so tests are deterministic).
    public static func delay(attempt: Int, jitter: Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 20)
        let base = min(0.1 * Double(1 << exponent), 30)
        let spread = 0.8 + 0.4 * min(max(jitter, 0), 1)
        return .milliseconds(Int64((base * spread * 1000).rounded()))
    }
}
