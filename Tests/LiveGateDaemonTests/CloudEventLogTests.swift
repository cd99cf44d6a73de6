// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import LiveSDK
import Testing

/// What the journal says of the cloud session: a routine renewal is no loss; a failed one is.
@Suite struct CloudEventLogTests {
    typealias Event = CloudEventLog.SessionEvent

    /// Runs a sequence of states from `notLoggedIn` and collects the events that are logged.
    func events(_ states: [SessionState]) -> [Event] {
        var previous = SessionState.notLoggedIn
        var up = false
        var events: [Event] = []
        for state in states {
            let (event, nowUp) = CloudEventLog.sessionEvent(from: previous, to: state, up: up)
            if event != .none { events.append(event) }
            previous = state
            up = nowUp
        }
        return events
    }

    @Test func aRoutineRenewalIsNoLoss() {
        // Login, then the access token expires and a refresh (or login) gets a new one, twice.
        let renewal: [SessionState] = [.tokenExpired, .establishing, .established]
        #expect(events([.establishing, .established] + renewal + renewal) == [.established, .renewing, .renewed, .renewing, .renewed])
    }

    @Test func aFailedRenewalIsALossAndTheNextSuccessAnAnnouncement() {
        // The renewal fails (the cloud is away): with a refresh token left the state is tokenExpired, else notLoggedIn.
        #expect(
            events([.establishing, .established, .tokenExpired, .establishing, .tokenExpired, .establishing, .established])
                == [.established, .renewing, .lost, .established]
        )
        #expect(events([.establishing, .established, .tokenExpired, .establishing, .notLoggedIn]) == [.established, .renewing, .lost])
        #expect(events([.establishing, .established, .terminated]) == [.established, .lost])
    }

    @Test func failuresBeforeTheFirstLoginAreNotLosses() {
        #expect(events([.establishing, .notLoggedIn, .establishing, .terminated]) == [])
    }
}
