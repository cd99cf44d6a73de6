// Licensed under the Apache License, Version 2.0.

import LiveJSON

// Live Service streams: the daemon's cloud user is the sender, the listener and the follower.

/// A user's access to a stream: `publishers` may send to the user, `subscribers` may receive what is sent
/// to the user (Kinvey's `LiveStreamAcl`).
public struct StreamAccess: Codable, Sendable, Equatable {
    public var publishers: [String]
    public var subscribers: [String]

    public init(publishers: [String] = [], subscribers: [String] = []) {
        self.publishers = publishers
        self.subscribers = subscribers
    }
}

/// `stream.send`: a message to one user.
public struct StreamSendParams: Codable, Sendable {
    public var stream: String
    public var to: String
    public var message: JSONValue

    public init(stream: String, to: String, message: JSONValue) {
        self.stream = stream
        self.to = to
        self.message = message
    }
}

/// `stream.post`: a message to everyone who follows the daemon's user.
public struct StreamPostParams: Codable, Sendable {
    public var stream: String
    public var message: JSONValue

    public init(stream: String, message: JSONValue) {
        self.stream = stream
        self.message = message
    }
}

/// `stream.send` and `stream.post`'s answer: the message as the cloud stored it.
public struct StreamSendResult: Codable, Sendable, Equatable {
    /// The cloud's event sequence number of the message.
    public var seq: Int64
    public var from: String
    public var to: String
    public var at: String

    public init(seq: Int64, from: String, to: String, at: String) {
        self.seq = seq
        self.from = from
        self.to = to
        self.at = at
    }
}

/// `stream.listen` (messages sent to the daemon's user) and `stream.follow` (what `user` posts).
public struct StreamListenParams: Codable, Sendable {
    public var stream: String
    /// `stream.follow` only: the user followed.
    public var user: String?

    public init(stream: String, user: String? = nil) {
        self.stream = stream
        self.user = user
    }
}

/// `stream.access`: read a user's access; `stream.grantAccess`: replace it (with `acl`).
public struct StreamAccessParams: Codable, Sendable {
    public var stream: String
    public var user: String
    /// `stream.grantAccess` only.
    public var acl: StreamAccess?

    public init(stream: String, user: String, acl: StreamAccess? = nil) {
        self.stream = stream
        self.user = user
        self.acl = acl
    }
}

/// `stream.message`'s params after the token: one message, encoded once for every token that hears it.
public struct StreamMessageBody: Codable, Sendable, Equatable {
    /// The cloud's event sequence number: strictly increasing on one token.
    public var seq: Int64
    public var stream: String
    public var from: String
    public var to: String
    public var at: String
    public var message: JSONValue

    public init(seq: Int64, stream: String, from: String, to: String, at: String, message: JSONValue) {
        self.seq = seq
        self.stream = stream
        self.from = from
        self.to = to
        self.at = at
        self.message = message
    }
}

/// `stream.notice`'s params after the token: something happened to the listening itself.
public struct StreamNoticeBody: Codable, Sendable, Equatable {
    /// `true`: the daemon's realtime link was down longer than the cloud's log reaches back; messages sent
    /// meanwhile may be lost.
    public var resync: Bool?
    /// The cloud refused the subscription when the daemon made it again (access revoked, stream removed).
    public var error: RPCError?

    public init(resync: Bool? = nil, error: RPCError? = nil) {
        self.resync = resync
        self.error = error
    }
}
