// Licensed under the Apache License, Version 2.0.

import LiveGateSystemd
import LiveSDK
import Logging
import Synchronization

/// Logs the key events of the cloud link, with their `MESSAGE_ID`s, as the engine reports them:
/// session established or lost, realtime connection established or lost.
///
/// A routine renewal (the access token expires, a refresh or a login gets a new one: established →
/// tokenExpired → establishing → established) is no loss: it is logged at debug level. The session is lost
/// (a warning) when a renewal or login fails, or the cloud refuses the credentials; established again
/// after that, it is announced again.
package final class CloudEventLog: Sendable {
    private let logger: Logger
    private let last = Mutex((session: SessionState.notLoggedIn, connection: ConnectionStatus.offline, sessionUp: false))

    init(logger: Logger) { self.logger = logger }

    /// Starts listening to `engine`.
    func attach(to engine: LiveClient) async {
        _ = await engine.session.addObserver { [self] state in sessionChanged(state) }
        _ = await engine.addConnectionObserver { [self] status in connectionChanged(status) }
    }

    /// What one session state change means for the log.
    package enum SessionEvent: Equatable {
        case established
        case renewing
        case renewed
        case lost
        case none
    }

    /// Pure: the event for a change from `previous` to `state`, given whether the session counts as up;
    /// returns the event and whether it counts as up afterwards.
    package static func sessionEvent(from previous: SessionState, to state: SessionState, up: Bool) -> (SessionEvent, up: Bool) {
        switch state {
        case .established:
            return (up ? .renewed : .established, true)
        case .tokenExpired where previous == .established:
            return (.renewing, up)
        case .establishing:
            return (.none, up)
        case .terminated, .notLoggedIn, .tokenExpired:
            // A failed login or renewal (the token expired after one, or the cloud refused the credentials).
            return (up ? .lost : .none, false)
        }
    }

    func sessionChanged(_ state: SessionState) {
        let event = last.withLock { last -> SessionEvent in
            let (event, up) = Self.sessionEvent(from: last.session, to: state, up: last.sessionUp)
            last.session = state
            last.sessionUp = up
            return event
        }
        switch event {
        case .established:
            logger.notice("cloud session established", metadata: [LogField.messageID: .string(LogMessageID.sessionEstablished)])
        case .renewing:
            logger.debug("cloud session: the access token expired; renewing it")
        case .renewed:
            logger.debug("cloud session renewed")
        case .lost:
            logger.warning(
                "cloud session lost",
                metadata: [LogField.messageID: .string(LogMessageID.sessionLost), "state": "\(state.rawValue)"]
            )
        case .none:
            break
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
