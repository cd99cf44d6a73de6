// Licensed under the Apache License, Version 2.0.

/// Metadata keys with a special meaning for the log handlers.
public enum LogField {
    /// Its value becomes the journal's `MESSAGE_ID` field (one of ``LogMessageID``).
    public static let messageID = "message_id"
}

/// `MESSAGE_ID`s of livegated's key events, for `journalctl MESSAGE_ID=...`. They never change.
public enum LogMessageID {
    public static let sessionEstablished = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e60"
    public static let sessionLost = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e61"
    public static let cloudConnected = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e62"
    public static let cloudLost = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e63"
    public static let clientRefused = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e64"
    public static let clientCutOff = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e65"
    public static let reloaded = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e66"
    public static let configRejected = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e67"
    public static let started = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e68"
    public static let stopping = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e69"
    public static let storageFailing = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e6a"
    public static let storageRecovered = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e6b"
    public static let cacheMovedAside = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e6c"
    public static let outboxDamaged = "6c3a1e0f2b8d4f5a9e7c1d2b3a4f5e6d"
}
