// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK
import Logging

/// Logs what the engine reports of the state directory's files, with their `MESSAGE_ID`s: a damaged cache
/// moved aside at start, queued writes moved from an old cache into the outbox, and each file's storage
/// failing (once, however often it fails after) and working again.
struct StorageEventLog: Sendable {
    let logger: Logger

    func attach(to engine: LiveClient) {
        if let recovery = engine.cacheRecovery {
            logger.error(
                "the cache was damaged; it was moved aside and a new one made (observers are served from the cloud)",
                metadata: [
                    LogField.messageID: .string(LogMessageID.cacheMovedAside), "file": "\(recovery.path)",
                    "movedTo": "\(recovery.movedTo)", "reason": "\(recovery.reason)",
                ]
            )
        }
        if engine.adoptedWrites > 0 {
            logger.notice("queued writes moved from the cache into the outbox", metadata: ["count": "\(engine.adoptedWrites)"])
        }
        _ = engine.addStorageObserver { [logger] event in Self.log(event, logger) }
    }

    static func log(_ event: StorageHealth.Event, _ logger: Logger) {
        switch event {
        case .failing(let file, let fault, let message):
            logger.error(
                "storage failing: \(message)",
                metadata: [LogField.messageID: .string(LogMessageID.storageFailing), "file": "\(file)", "reason": "\(fault.rawValue)"]
            )
        case .recovered(let file, let fault, let failures):
            logger.notice(
                "storage works again",
                metadata: [
                    LogField.messageID: .string(LogMessageID.storageRecovered), "file": "\(file)", "reason": "\(fault.rawValue)",
                    "failures": "\(failures)",
                ]
            )
        }
    }
}
