// Licensed under the Apache License, Version 2.0.

/// Metadata keys with a special meaning for the log handlers.
public enum LogField {
    /// Its value becomes the journal's `MESSAGE_ID` field (one of ``LogMessageID``).
    public static let messageID = "message_id"
}

/// `MESSAGE_ID`s of livegated's key events, for `journalctl MESSAGE_ID=...`: random 128-bit IDs
/// (`systemd-id128 new`), each explained in the journal's message catalog (`systemd/livegate.catalog`, for
/// `journalctl -x`). They do not change (sequential ones before them were replaced once, after 0.1.0).
public enum LogMessageID {
    public static let sessionEstablished = "0c5c0ddf55424ee6b4a766287c710ab1"
    public static let sessionLost = "fdc7c6fe55f24f0b84074661df01d083"
    public static let cloudConnected = "3cc3d1bc57be4f17af9bc4d70c17a152"
    public static let cloudLost = "f6e11513915444d5927422a8cd4b8317"
    public static let clientRefused = "a255f6108d6942c08251ad03fb1e5f90"
    public static let clientCutOff = "22c57993a0d64912a952047b7919781d"
    public static let reloaded = "934d910a75f448d88eb6152beb0fcb9b"
    public static let configRejected = "ed04ccd18bcf419189fe59c33d2e6a52"
    public static let started = "904602c2193a493aafb369636eb1ccdf"
    public static let stopping = "ed25fb83ba91443f955a716b191a05c9"
    public static let storageFailing = "5458134890c044c096e660b252b83c7e"
    public static let storageRecovered = "75717a088b1d4d90831ee5a3eca39f38"
    public static let cacheMovedAside = "d2ae51b03d10453f887ddcba0a942873"
    public static let outboxDamaged = "cd4c7809fc52433a8fbd45c68731505a"
    public static let outboxSalvaged = "93e28c64771c49abbdeea610202497fa"

    /// Every ID above (the catalog must explain each).
    public static let all = [
        sessionEstablished, sessionLost, cloudConnected, cloudLost, clientRefused, clientCutOff, reloaded, configRejected, started,
        stopping, storageFailing, storageRecovered, cacheMovedAside, outboxDamaged, outboxSalvaged,
    ]
}
