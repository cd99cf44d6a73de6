// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK
import Logging
import Synchronization

/// Logs the key events of the cloud link, with their `MESSAGE_ID`s, as the engine reports them:
/// session established or lost, realtime connection established or lost.
final class CloudEventLog: Sendable {
    private let logger: Logger
    private let last = Mutex((session: SessionState.notLoggedIn, connection: ConnectionStatus.offline))

    init(logger: Logger) { self.logger = logger }

    /// Starts listening to `engine`.
    func attach(to engine: LiveClient) async {
        _ = await engine.session.addObserver { [self] state in sessionChanged(state) }
        _ = await engine.addConnectionObserver { [self] status in connectionChanged(status) }
    }

    func sessionChanged(_ state: SessionState) {
        let previous = last.withLock { last in
            defer { last.session = state }
            return last.session
        }
        if previous != .established && state == .established {
            logger.notice("cloud session established", metadata: [LogField.messageID: .string(LogMessageID.sessionEstablished)])
        } else if previous == .established && state != .established {
            logger.warning(
                "cloud session lost",
                metadata: [LogField.messageID: .string(LogMessageID.sessionLost), "state": "\(state.rawValue)"]
            )
        }
    }

    func connectionChanged(_ status: ConnectionStatus) {
        let previous = last.withLock { last in
            defer { last.connection = status }
            return last.connection
        }
        if previous != .connected && status == .connected {
            logger.notice("realtime connection to the cloud established", metadata: [LogField.messageID: .string(LogMessageID.cloudConnected)])
        } else if previous == .connected && status != .connected {
            logger.warning(
                "realtime connection to the cloud lost",
                metadata: [LogField.messageID: .string(LogMessageID.cloudLost), "status": "\(status.rawValue)"]
            )
        }
    }
}
