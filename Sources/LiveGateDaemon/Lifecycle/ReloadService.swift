// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateConfig
import LiveGateSystemd
import LiveSDK
import Logging
import ServiceLifecycle
import UnixSignals

/// Re-reads the configuration on SIGHUP (`systemctl reload`), without dropping clients: the log level,
/// limits and access policy change (limits and policy apply to connections opened after the reload); an
/// invalid file is refused with a log entry and the running settings are kept.
struct ReloadService: Service {
    let context: DaemonContext
    /// Created by the caller before the daemon announces readiness, so no SIGHUP can arrive untrapped.
    let signals: UnixSignalsSequence
    let logger: Logger

    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            reload()
            // READY=1 ends the reload, with the status as it is now (not a fixed line that stays until
            // something else changes).
            await context.notifier.notifyInsisting("READY=1\nSTATUS=\(await context.statusLine())")
        }
    }

    /// One reload, after `RELOADING=1` as `sd_notify(3)` asks (the caller sends the `READY=1` that ends it).
    func reload() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let monotonicMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        context.notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(monotonicMicroseconds)\nSTATUS=reloading the configuration")

        let configuration = context.configuration
        guard let path = configuration.configPath else {
            logger.notice("reload requested, but the daemon was started without --config: nothing to re-read")
            return
        }
        let file: ConfigFile
        do {
            file = try ConfigFile.load(path: path)
        } catch {
            logger.error(
                "configuration rejected; the running settings are kept",
                metadata: [LogField.messageID: .string(LogMessageID.configRejected), "error": "\(error)", "file": "\(path)"]
            )
            return
        }
        for (name, old, new) in [
            ("cloud-url", configuration.cloudURL, file.cloudURL),
            ("username", configuration.credentials.username, file.username),
            ("state-dir", configuration.stateDirectory, file.stateDirectory),
        ] where new != nil && new != old {
            logger.warning("\(name) changed in \(path); it takes effect at the next restart")
        }
        let level = configuration.logLevelOverride ?? file.logLevel ?? .info
        context.settings.logLevel = level
        context.settings.limits = file.limits
        context.settings.policy = file.policy
        logger.notice(
            "configuration reloaded",
            metadata: [
                LogField.messageID: .string(LogMessageID.reloaded), "file": "\(path)", "logLevel": "\(level)",
                "maxFrameBytes": "\(file.limits.maxFrameBytes)",
            ]
        )
    }
}
