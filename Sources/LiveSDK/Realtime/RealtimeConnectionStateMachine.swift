// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI

/// The cloud connection's state, as observers see it (Kinvey's `onStatus`).
public enum ConnectionStatus: String, Sendable, Codable {
    /// Not started, or stopped.
    case offline
    /// Connecting for the first time, or again after a failure.
    case connecting
    /// The realtime WebSocket is open.
    case connected
    /// The connection failed; the next attempt is scheduled after a backoff.
    case reconnecting
}

/// The realtime connection's state machine: which topics are wanted (reference-counted) and how far each
/// has been heard, whether the WebSocket is up, and when to try again. Pure: the shell performs the returned actions; time and
/// randomness come in as parameters.
public struct RealtimeConnectionStateMachine: Sendable {
    public enum Phase: Equatable, Sendable {
        case idle
        case connecting(attempt: Int)
        case connected
        case backingOff(attempt: Int)
    }

    public private(set) var phase: Phase = .idle
    /// Per wanted topic: its holders and how far it has been heard. One table for both, since each table keyed
    /// by topic costs every observed object an entry.
    private var wanted: [Topic: Wanted] = [:]
    /// Held topics whose subscription the cloud ended (see ``subscriptionEnded(_:)``).
    private var endedByCloud: Set<Topic> = []

    /// 24 bytes, so an entry of the table is 64 with its topic: a count that fits 32 bits, and ``Heard``'s two
    /// optional sequence numbers kept as plain ones, `Int64.min` for none (a sequence number is never negative).
    private struct Wanted {
        /// Holders; 0 while a released topic lingers (still subscribed, until it expires).
        var references: Int32
        private var seq = Int64.min
        private var eventSeq = Int64.min

        init(references: Int32) { self.references = references }

        var heard: Heard {
            get { Heard(seq: seq == .min ? nil : seq, eventSeq: eventSeq == .min ? nil : eventSeq) }
            set {
                seq = newValue.seq ?? .min
                eventSeq = newValue.eventSeq ?? .min
            }
        }
    }

    /// How far the connection has heard a wanted topic; forgotten with the topic.
    public struct Heard: Equatable, Sendable {
        /// What a subscription of the topic resumes from: the newest of its events heard, of the sequence
        /// numbers its subscription's answer said, and of the reads it was subscribed from.
        public var seq: Int64?
        /// The newest of its events heard.
        public var eventSeq: Int64?

        public init(seq: Int64? = nil, eventSeq: Int64? = nil) {
            self.seq = seq
            self.eventSeq = eventSeq
        }
    }

    public init() {}

    /// How far `topic` has been heard; `nil` when it is not wanted.
    public func heard(_ topic: Topic) -> Heard? { wanted[topic]?.heard }

    /// `topic` is heard as of `seq` (a subscription's answer, a read it resumes from), unless it was heard
    /// further already. Nothing for a topic not wanted.
    public mutating func heard(_ seq: Int64, of topic: Topic) {
        guard let index = wanted.index(forKey: topic) else { return }
        wanted.values[index].heard.seq = max(wanted.values[index].heard.seq ?? 0, seq)
    }

    /// `topic` is heard as of `seq` only if nothing was heard of it yet.
    public mutating func heardFirst(_ seq: Int64, of topic: Topic) {
        guard let index = wanted.index(forKey: topic), wanted.values[index].heard.seq == nil else { return }
        wanted.values[index].heard.seq = seq
    }

    /// An event of `topic` at `seq` was heard.
    public mutating func heardEvent(_ seq: Int64, of topic: Topic) {
        guard let index = wanted.index(forKey: topic) else { return }
        wanted.values[index].heard.seq = max(wanted.values[index].heard.seq ?? 0, seq)
        wanted.values[index].heard.eventSeq = seq
    }

    /// Forgets how far `topic` was heard (its subscription ended: a new one starts from the cloud's head).
    public mutating func forgetHeard(_ topic: Topic) {
        wanted[topic]?.heard = Heard()
    }

    /// The topics with at least one holder, and those lingering after their last holder left.
    public var wantedTopics: Set<Topic> { Set(wanted.keys) }

    /// Whether `topic` is wanted (O(1): ``wantedTopics`` builds a set of them all).
    public func wants(_ topic: Topic) -> Bool { wanted[topic] != nil }

    /// What releasing a reference does.
    public enum Release: Equatable, Sendable {
        /// Other holders remain.
        case held
        /// That was the last holder: the topic lingers, still subscribed, until ``expire(_:)`` (a new
        /// holder in the meantime takes it over with no gap and no new subscription).
        case linger
        /// The topic was not held.
        case notHeld
    }

    public var status: ConnectionStatus {
        switch phase {
        case .idle: .offline
        case .connecting(let attempt): attempt == 1 ? .connecting : .reconnecting
        case .connected: .connected
        case .backingOff: .reconnecting
        }
    }

    /// Takes one reference on `topic`. Returns `true` when a `subscribe` must be sent now (first
    /// reference while connected, the topic not lingering); when not connected, the topic is subscribed on
    /// connect.
    public mutating func acquire(_ topic: Topic) -> Bool {
        guard wanted[topic] != nil else {
            wanted[topic] = Wanted(references: 1)
            return phase == .connected
        }
        wanted[topic]?.references += 1
        // The cloud ended the subscription while it was held: a new holder subscribes again.
        return endedByCloud.remove(topic) != nil && phase == .connected
    }

    /// The cloud ended the subscription of a held topic on its own (a stream ACL no longer allows it). The
    /// holders keep their references; the next ``acquire(_:)`` (or the next connection) subscribes again.
    public mutating func subscriptionEnded(_ topic: Topic) {
        if wanted[topic] != nil { endedByCloud.insert(topic) }
    }

    /// Drops one reference on `topic`.
    public mutating func release(_ topic: Topic) -> Release {
        guard let count = wanted[topic]?.references, count > 0 else { return .notHeld }
        wanted[topic]?.references = count - 1
        return count > 1 ? .held : .linger
    }

    /// Takes back a reference whose subscription the cloud refused: no linger (nothing is subscribed).
    public mutating func abandon(_ topic: Topic) {
        guard let count = wanted[topic]?.references else { return }
        if count > 1 {
            wanted[topic]?.references = count - 1
        } else {
            wanted[topic] = nil
        }
    }

    /// The linger of a released topic is over. Returns whether it was dropped (no new holder came), and
    /// whether an `unsubscribe` must be sent now.
    public mutating func expire(_ topic: Topic) -> (dropped: Bool, unsubscribe: Bool) {
        guard wanted[topic]?.references == 0 else { return (false, false) }
        wanted[topic] = nil
        let ended = endedByCloud.remove(topic) != nil
        return (true, phase == .connected && !ended)
    }

    /// A connection attempt starts.
    public mutating func connectionStarted() {
        switch phase {
        case .idle: phase = .connecting(attempt: 1)
        case .backingOff(let attempt): phase = .connecting(attempt: attempt + 1)
        case .connecting, .connected: break
        }
    }

    /// The WebSocket is open. Returns the topics to subscribe to now.
    public mutating func connectionEstablished() -> Set<Topic> {
        phase = .connected
        endedByCloud.removeAll()
        return wantedTopics
    }

    /// The connection failed or closed. Returns how long to wait before the next attempt.
    /// - Parameter jitter: a random number in `0..<1` (injected so tests are deterministic).
    public mutating func connectionLost(jitter: Double) -> Duration {
        let attempt: Int
        switch phase {
        case .connecting(let a): attempt = a
        case .connected, .idle, .backingOff: attempt = 1
        }
        phase = .backingOff(attempt: attempt)
        return Self.backoff(attempt: attempt, jitter: jitter)
    }

    /// The reconnect delay after `attempt` failures (see ``Backoff``).
    public static func backoff(attempt: Int, jitter: Double) -> Duration {
        Backoff.delay(attempt: attempt, jitter: jitter)
    }
}
