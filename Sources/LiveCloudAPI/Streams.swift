// Licensed under the Apache License, Version 2.0.

import LiveJSON

/// Who may use a stream with one user (Kinvey's `LiveStreamAcl`): `publishers` may send messages to the
/// user, `subscribers` may receive what is sent to the user. Without an ACL no one may do either.
///
/// Directed communication gives a user's ACL the senders as publishers and the user as subscriber; feed
/// communication gives the user as the only publisher (posting is sending to oneself) and the followers as
/// subscribers.
public struct StreamACL: Codable, Sendable, Equatable {
    public var publishers: [String]
    public var subscribers: [String]

    public init(publishers: [String] = [], subscribers: [String] = []) {
        self.publishers = publishers
        self.subscribers = subscribers
    }

    /// The first name in it that is not a valid user name, if any.
    public var invalidName: String? {
        (publishers + subscribers).first { !EntityKey.isValidName($0) }
    }
}

/// One message sent on a stream, as stored and delivered.
public struct StreamMessage: Codable, Sendable, Equatable {
    public var stream: String
    /// The sender's user id.
    public var from: String
    /// The recipient's user id (the sender's own for a post).
    public var to: String
    /// When the cloud accepted it (RFC 3339, UTC).
    public var at: String
    /// The message itself: any JSON value the app chooses.
    public var message: JSONValue

    public init(stream: String, from: String, to: String, at: String, message: JSONValue) {
        self.stream = stream
        self.from = from
        self.to = to
        self.at = at
        self.message = message
    }
}

/// `POST /v1/streams/{stream}/users/{user}/messages` request body.
public struct SendStreamMessageRequest: Codable, Sendable {
    public var message: JSONValue
    public init(message: JSONValue) { self.message = message }
}

/// `POST /v1/streams/{stream}/users/{user}/messages` response body: the message as stored, and the event
/// sequence number it was delivered under.
public struct SentStreamMessage: Codable, Sendable, Equatable {
    public var seq: Int64
    public var message: StreamMessage

    public init(seq: Int64, message: StreamMessage) {
        self.seq = seq
        self.message = message
    }
}

/// `GET /v1/streams` and `PUT /v1/streams/{stream}` response body.
public struct StreamList: Codable, Sendable, Equatable {
    /// The streams' names, sorted.
    public var streams: [String]
    /// The largest message a stream accepts, in bytes of its JSON encoding.
    public var messageLimit: Int

    public init(streams: [String], messageLimit: Int) {
        self.streams = streams
        self.messageLimit = messageLimit
    }
}
