// Licensed under the Apache License, Version 2.0.

import Logging

/// The cloud's log lines: swift-log's `StreamLogHandler` on standard error (swift-log's default), the same
/// lines, but metadata set on the logger is kept as it is and formatted only when a line is logged.
///
/// Hummingbird gives every request a logger with its own `hb.request.id`. `StreamLogHandler` formats its whole
/// metadata into text each time metadata is set, so every request paid for a line that, at the `info` level, is
/// never written (1.4 % of the cloud's CPU in a profile of the cloud bench).
public struct CloudLogHandler: LogHandler {
    private var inner: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    public init(label: String) {
        inner = StreamLogHandler.standardError(label: label)
    }

    /// Lines to `stream` instead (tests).
    package init(label: String, stream: any TextOutputStream & Sendable) {
        inner = StreamLogHandler(label: label, stream: stream, metadataProvider: nil)
    }

    public var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The logger's metadata goes with the line's own, which wins on a key both have. (On a key a metadata
    /// provider also gives, the logger's value wins here; the cloud sets no provider.)
    public func log(event: LogEvent) {
        var event = event
        if !metadata.isEmpty {
            event.metadata = metadata.merging(event.metadata ?? [:]) { _, line in line }
        }
        inner.log(event: event)
    }
}
