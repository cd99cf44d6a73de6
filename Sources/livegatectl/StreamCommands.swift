// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateClient
import LiveGateProtocol
import LiveJSON

/// `livegatectl stream send|post|listen|follow|grant|access`: Live Service streams, as the daemon's cloud user.
struct Stream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Live Service streams, as the daemon's cloud user: send, post, listen, follow, grant and read access.",
        discussion: """
            Directed: 'stream grant songs alice --publishers bob --subscribers alice' lets bob send to alice \
            and alice hear it; 'stream listen songs' prints what is sent to the daemon's user. Feed: \
            'stream post songs MESSAGE' reaches everyone following the daemon's user; 'stream follow songs bob' \
            prints what bob posts.
            """,
        subcommands: [Send.self, Post.self, Listen.self, Follow.self, Grant.self, Access.self]
    )

    /// A message argument: JSON when it parses as JSON, else the text itself as a JSON string.
    static func message(_ text: String) -> JSONValue {
        (try? JSONValue(parsing: text)) ?? .string(text)
    }

    static func describe(_ sent: StreamSendResult) -> String {
        "sent to \(sent.to) (seq \(sent.seq), \(sent.at))"
    }

    /// Prints each event of a stream token until interrupted (or `count` messages).
    static func print(_ listening: StreamListening, json: Bool, count: Int?) async throws {
        var printed = 0
        for try await event in listening.events {
            switch event {
            case .message(let message):
                Swift.print(json ? jsonText(message) : "\(message.at) \(message.from) → \(message.to): \(jsonText(message.message))")
                printed += 1
            case .resync:
                Swift.print(json ? #"{"resync":true}"# : "(the daemon was disconnected from the cloud too long: messages may have been missed)")
            case .error(let error):
                Swift.print(
                    json
                        ? jsonText(StreamNoticeBody(error: RPCError(code: error.code ?? .internalError, message: error.message)))
                        : "error: \(error.message)"
                )
            }
            fflush(nil)
            if let count, printed >= count { return }
        }
    }

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a message to a user.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Argument(help: "The recipient's user id.") var user: String
        @Argument(help: "The message: JSON, or plain text (sent as a JSON string).") var message: String
        @Flag(help: "Print the daemon's answer as JSON.") var json = false

        func run() async throws {
            try await withDaemon(connection) { daemon in
                let sent = try await daemon.send(stream: stream, to: user, message: Stream.message(message))
                Swift.print(json ? jsonText(sent) : Stream.describe(sent))
            }
        }
    }

    struct Post: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Post a message to everyone following the daemon's user.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Argument(help: "The message: JSON, or plain text (sent as a JSON string).") var message: String
        @Flag(help: "Print the daemon's answer as JSON.") var json = false

        func run() async throws {
            try await withDaemon(connection) { daemon in
                let sent = try await daemon.post(stream: stream, message: Stream.message(message))
                Swift.print(json ? jsonText(sent) : Stream.describe(sent))
            }
        }
    }

    struct Listen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every message sent to the daemon's user, until interrupted.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Flag(help: "One JSON line per message.") var json = false
        @Option(help: "Exit after this many messages.") var count: Int?

        func run() async throws {
            try await withDaemon(connection) { daemon in
                try await Stream.print(try await daemon.listen(stream: stream), json: json, count: count)
            }
        }
    }

    struct Follow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every message a user posts, until interrupted.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Argument(help: "The user followed.") var user: String
        @Flag(help: "One JSON line per message.") var json = false
        @Option(help: "Exit after this many messages.") var count: Int?

        func run() async throws {
            try await withDaemon(connection) { daemon in
                try await Stream.print(try await daemon.follow(stream: stream, user: user), json: json, count: count)
            }
        }
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace a user's access to a stream: who may send to the user, who may hear what is sent to the user."
        )
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Argument(help: "The user whose access list this is.") var user: String
        @Option(parsing: .upToNextOption, help: "Users who may send to the user.") var publishers: [String] = []
        @Option(parsing: .upToNextOption, help: "Users who may receive what is sent to the user.") var subscribers: [String] = []

        func run() async throws {
            try await withDaemon(connection) { daemon in
                let acl = try await daemon.grantAccess(
                    stream: stream,
                    user: user,
                    acl: StreamAccess(publishers: publishers, subscribers: subscribers)
                )
                Swift.print(jsonText(acl))
            }
        }
    }

    struct Access: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a user's access to a stream.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The stream.") var stream: String
        @Argument(help: "The user whose access list this is.") var user: String

        func run() async throws {
            try await withDaemon(connection) { daemon in
                Swift.print(jsonText(try await daemon.access(stream: stream, user: user)))
            }
        }
    }
}
