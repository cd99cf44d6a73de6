// Licensed under the Apache License, Version 2.0.

import LiveGateCloud
import Logging
import Synchronization
import Testing

/// The cloud's handler writes the lines `StreamLogHandler` writes, though it formats a logger's metadata only
/// when a line is logged.
@Suite struct CloudLogHandlerTests {
    private final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    /// Everything after the timestamp: the timestamp is the second the line was written.
    private static func withoutTimestamp(_ text: String) -> [String] {
        text.split(separator: "\n").map { line in String(line.drop { $0 != " " }) }
    }

    @Test func theLinesAreStreamLogHandlersWithTheLoggersAndTheLinesMetadata() {
        let (ours, theirs) = (Lines(), Lines())
        var loggers = [
            Logger(label: "cloud", factory: { CloudLogHandler(label: $0, stream: ours) }),
            Logger(label: "cloud", factory: { StreamLogHandler(label: $0, stream: theirs, metadataProvider: nil) }),
        ]
        for index in loggers.indices {
            loggers[index].info("plain")
            loggers[index][metadataKey: "hb.request.id"] = "42"
            loggers[index][metadataKey: "b"] = "logger"
            loggers[index].info("with the logger's")
            loggers[index].warning("both, the line's wins", metadata: ["b": "line", "a": "1"])
            loggers[index][metadataKey: "hb.request.id"] = nil
            loggers[index].debug("below the level")
            loggers[index].error("one key left")
        }
        let lines = Self.withoutTimestamp(ours.text.withLock { $0 })
        #expect(lines == Self.withoutTimestamp(theirs.text.withLock { $0 }))
        #expect(lines.count == 4)
        #expect(lines.dropFirst(2).first?.contains("a=1 b=line hb.request.id=42") == true, "\(lines)")
    }
}
