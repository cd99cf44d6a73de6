// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateProtocol
import LiveGateSystemd
import LiveSDK
import Logging

extension QuarantinedOutbox {
    /// The damaged outbox `engine` salvaged at start, while its file is still there.
    static func kept(by engine: LiveClient) -> QuarantinedOutbox? {
        guard let salvage = engine.startReport.outboxSalvage, FileManager.default.fileExists(atPath: salvage.movedTo) else { return nil }
        return QuarantinedOutbox(file: salvage.movedTo, salvaged: salvage.salvaged, unreadable: salvage.unreadable)
    }
}

/// Logs what the engine reports of the state directory's files, with their `MESSAGE_ID`s: a damaged cache
/// moved aside at start, queued writes moved from an old cache into the outbox, and each file's storage
/// failing (once, however often it fails after) and working again.
struct StorageEventLog: Sendable {
    let logger: Logger

    func attach(to engine: LiveClient) {
        if let recovery = engine.startReport.cacheRecovery {
            logger.error(
                "the cache was damaged; it was moved aside and a new one made (observers are served from the cloud)",
                metadata: [
                    LogField.messageID: .string(LogMessageID.cacheMovedAside), "file": "\(recovery.path)",
                    "movedTo": "\(recovery.movedTo)", "reason": "\(recovery.reason)",
                ]
            )
        }
        if let salvage = engine.startReport.outboxSalvage {
            logger.critical(
                "\(Self.describe(salvage))",
                metadata: [
                    LogField.messageID: .string(LogMessageID.outboxSalvaged), "file": "\(salvage.path)", "movedTo": "\(salvage.movedTo)",
                    "salvaged": "\(salvage.salvaged)", "unreadable": "\(salvage.unreadable.map(String.init) ?? "unknown")",
                    "reason": "\(salvage.reason)",
                ]
            )
        }
        if engine.startReport.adoptedWrites > 0 {
            logger.notice("queued writes moved from the cache into the outbox", metadata: ["count": "\(engine.startReport.adoptedWrites)"])
        }
        _ = engine.addStorageObserver { [logger] event in Self.log(event, logger) }
    }

    /// The journal's sentence for a salvaged outbox: what was kept, what could not be, where the damaged file is.
    static func describe(_ salvage: OutboxSalvage) -> String {
        let lost =
            switch salvage.unreadable {
            case 0?: "no write was lost"
            case let count?: "\(count) could not be read and will not be sent"
            case nil: "how many could not be read is not known"
            }
        return "the outbox was damaged (\(salvage.reason)); \(salvage.salvaged) queued writes were salvaged into a new one and "
            + "will be sent in order, \(lost); the damaged file is kept at \(salvage.movedTo) (inspect it with "
            + "sqlite3 \(salvage.movedTo) .recover; remove it when done)"
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
