// Licensed under the Apache License, Version 2.0.

import LiveGateConfig

/// The configuration file's parser. Must hold: it never crashes, and a file it accepts has only values it
/// checked (limits at least 1, the request rate 0 or more, a socket mode within 0o777).
enum ConfigFuzz {
    static func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let file = try? ConfigFile.parse(text, source: "fuzz") else { return }
        if let limits = file.limits as ConnectionLimits? {
            try check(
                limits.maxFrameBytes >= 1 && limits.maxConnections >= 1 && limits.maxTokensPerConnection >= 1
                    && limits.maxRequestsPerSecond >= 0 && limits.maxQueuedBytesPerConnection >= 1,
                "accepted limits out of range: \(limits)"
            )
        }
        if let mode = file.socketMode { try check(mode <= 0o777, "accepted socket mode \(String(mode, radix: 8))") }
    }
}
