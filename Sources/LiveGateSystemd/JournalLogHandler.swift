// Licensed under the Apache License, Version 2.0.

import CSystemd
import Foundation
import Logging
import Synchronization

/// A swift-log handler that writes native journal entries (`sd_journal_sendv`).
///
/// Fields: `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`,
/// `LOGGER_LABEL`, `SWIFT_LOG_SOURCE`, `MESSAGE_ID` (from the metadata key ``LogField/messageID``), and
/// every other metadata key as `LIVEGATE_<KEY>` (upper-cased, other characters than `A-Z 0-9` as `_`):
/// `conn` → `LIVEGATE_CONN`, `client_pid` → `LIVEGATE_CLIENT_PID`. Values of keys that name secrets
/// (password, secret, authorization, credential, access token) are replaced by `<redacted>`.
/// If the journal refuses an entry, it is written to stderr instead, so nothing is lost silently.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let identifier: String
    private let level: LogLevelControl

    public init(label: String, identifier: String, level: LogLevelControl) {
        self.label = label
        self.identifier = identifier
        self.level = level
    }

    public var logLevel: Logger.Level {
        get { level.level }
        set { level.level = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var fields: [(String, String)] = [
            ("MESSAGE", event.message.description),
            ("PRIORITY", String(Self.priority(event.level))),
            ("SYSLOG_IDENTIFIER", identifier),
            ("CODE_FILE", event.file),
            ("CODE_LINE", String(event.line)),
            ("CODE_FUNC", event.function),
            ("LOGGER_LABEL", label),
            ("SWIFT_LOG_SOURCE", event.source),
        ]
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            if key == LogField.messageID {
                fields.append(("MESSAGE_ID", value.description))
            } else {
                fields.append((Self.fieldName(key), Self.isSecret(key) ? "<redacted>" : value.description))
            }
        }
        if Self.send(fields) < 0 {
            let line = "\(identifier)[\(getpid())]: \(event.level) \(event.message) \(merged.isEmpty ? "" : "\(merged)")\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// syslog priorities: trace and debug are 7 (debug), critical is 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// `LIVEGATE_` + the key upper-cased, with every character outside `A-Z 0-9` as `_`; at most 64 characters.
    static func fieldName(_ key: String) -> String {
        let body = key.uppercased().unicodeScalars.map { scalar -> Character in
            (scalar >= "A" && scalar <= "Z") || (scalar >= "0" && scalar <= "9") ? Character(scalar) : "_"
        }
        return String(("LIVEGATE_" + String(body)).prefix(64))
    }

    static func isSecret(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return ["password", "secret", "authorization", "credential", "accesstoken", "access_token", "refreshtoken"]
            .contains { lowered.contains($0) }
    }

    /// Sends one entry; returns 0 or a negative errno. Field names must be valid journal names.
    static func send(_ fields: [(String, String)]) -> Int32 {
        var blob: [UInt8] = []
        var spans: [(offset: Int, length: Int)] = []
        for (name, value) in fields {
            let start = blob.count
            blob.append(contentsOf: name.utf8)
            blob.append(UInt8(ascii: "="))
            blob.append(contentsOf: value.utf8)
            spans.append((start, blob.count - start))
        }
        return blob.withUnsafeMutableBytes { raw -> Int32 in
            guard let base = raw.baseAddress else { return -1 }
            var vectors = spans.map { iovec(iov_base: base + $0.offset, iov_len: $0.length) }
            return sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }
}

/// The log level shared by every handler of the process, so a reload can change it.
public final class LogLevelControl: Sendable {
    private let current: Mutex<Logger.Level>

    public init(_ level: Logger.Level) { current = Mutex(level) }

    public var level: Logger.Level {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }
}

/// A stderr handler (swift-log's `StreamLogHandler`) whose level follows a ``LogLevelControl``.
public struct StderrLogHandler: LogHandler {
    private var inner: StreamLogHandler
    private let level: LogLevelControl

    public init(label: String, level: LogLevelControl) {
        inner = StreamLogHandler.standardError(label: label)
        self.level = level
    }

    public var logLevel: Logger.Level {
        get { level.level }
        set { level.level = newValue }
    }

    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        var event = event
        if var metadata = event.metadata {
            for key in metadata.keys where JournalLogHandler.isSecret(key) { metadata[key] = "<redacted>" }
            event.metadata = metadata
        }
        inner.log(event: event)
    }
}

/// Where the daemon's logs go: the journal when it is there, else stderr.
public enum LogDestination {
    /// The journal is there when stderr is connected to it (`JOURNAL_STREAM` names stderr's device and
    /// inode) or its native socket exists.
    public static func journalAvailable(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        if let stream = environment["JOURNAL_STREAM"] {
            var info = stat()
            if fstat(2, &info) == 0, stream == "\(info.st_dev):\(info.st_ino)" { return true }
        }
        return access("/run/systemd/journal/socket", F_OK) == 0
    }

    /// Where to log: `auto` (the journal when ``journalAvailable(environment:)``, else stderr), or forced.
    public enum Target: String, Sendable, CaseIterable {
        case auto, journal, stderr
    }

    /// A factory for `LoggingSystem.bootstrap`.
    public static func handlerFactory(
        identifier: String,
        level: LogLevelControl,
        target: Target = .auto
    ) -> @Sendable (String) -> any LogHandler {
        let journal = target == .journal || (target == .auto && journalAvailable())
        return { label in
            journal
                ? JournalLogHandler(label: label, identifier: identifier, level: level)
                : StderrLogHandler(label: label, level: level)
        }
    }
}
