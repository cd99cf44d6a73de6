// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateClient
import LiveGateProtocol
import LiveJSON

/// Exit codes (also in `livegatectl --help`):
/// 0 success · 1 the daemon answered with an error · 2 usage error · 3 the daemon could not be reached or
/// closed the connection.
@main
struct Livegatectl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegatectl",
        abstract: "Talk to livegated: watch live objects, write them, show the daemon's status.",
        discussion: """
            Exit codes: 0 success; 1 the daemon answered with an error; 2 usage error; \
            3 the daemon could not be reached or closed the connection.
            """,
        subcommands: [Status.self, Watch.self, Put.self, Delete.self]
    )
}

struct ConnectionOptions: ParsableArguments {
    @Option(help: "The daemon's socket (default: $LIVEGATE_SOCKET, else /run/livegate/livegate.sock).")
    var socket: String = LiveGateConnection.defaultSocketPath
}

/// Runs `body` on a connection, turning failures into a message on stderr and the documented exit code.
func withDaemon(_ options: ConnectionOptions, _ body: (LiveGateConnection) async throws -> Void) async throws {
    do {
        try await LiveGateConnection.withConnection(socketPath: options.socket, client: "livegatectl") { try await body($0) }
    } catch let error as LiveGateError {
        FileHandle.standardError.write(Data("livegatectl: \(error.message)\n".utf8))
        throw ExitCode(error.code == nil || error.code == .limitExceeded ? 3 : 1)
    }
}

func jsonText(_ value: some Encodable) -> String {
    (try? String(decoding: WireJSON.encode(value), as: UTF8.self)) ?? "?"
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's version, protocol and cloud session state.")
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print the daemon's hello answer as JSON.") var json = false

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let hello = daemon.hello
            if json {
                print(jsonText(hello))
            } else {
                print("livegated \(hello.version), protocol \(hello.protocol), cloud session \(hello.session)")
            }
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Watch a live object: print its state now and at every change.",
        discussion: "Runs until interrupted, or until --until-version is reached."
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The object's collection.") var collection: String
    @Argument(help: "The object's id.") var id: String
    @Flag(help: "One JSON line per change (the daemon's object.changed params).") var json = false
    @Flag(help: "Wait for fresh data: skip the cached version.") var freshOnly = false
    @Option(help: "Exit once a snapshot with at least this version has been shown.") var untilVersion: Int64?

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let observation = try await daemon.observeObject(
                collection: collection,
                id: id,
                policy: freshOnly ? .freshOnly : nil
            )
            for try await change in observation.changes {
                print(json ? Self.jsonLine(change) : Self.describe(change))
                fflush(nil)
                if let untilVersion, let version = change.snapshot?.version, version >= untilVersion { return }
            }
        }
    }

    static func jsonLine(_ change: ObjectChangedParams) -> String {
        jsonText(
            ObjectChangedBody(
                snapshot: change.snapshot,
                dataStatus: change.dataStatus,
                loadingStatus: change.loadingStatus,
                error: change.error
            )
        )
    }

    static func describe(_ change: ObjectChangedParams) -> String {
        let status = "[\(change.dataStatus.rawValue), \(change.loadingStatus.rawValue)\(change.resync == true ? ", resync" : "")]"
        var line: String
        if let snapshot = change.snapshot {
            line = "\(snapshot.collection)/\(snapshot.id) v\(snapshot.version) \(status) \(jsonText(snapshot.data))"
        } else {
            line = "(no object) \(status)"
        }
        if let error = change.error { line += " error: \(error.message)" }
        return line
    }
}

struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an object's data through the daemon (creating it if needed).",
        discussion: "Example: livegatectl put notes n1 '{\"text\": \"hello\"}'"
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The object's collection.") var collection: String
    @Argument(help: "The object's id.") var id: String
    @Argument(help: "The new data: a JSON object.") var data: String
    @Option(help: "Write only if the stored version is exactly this (0: only if it does not exist).") var ifVersion: Int64?
    @Flag(help: "Merge the data into the stored data (JSON merge patch: null removes a member) instead of replacing it.")
    var merge = false
    @Flag(help: "Print the stored snapshot as JSON.") var json = false

    func validate() throws {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(data.utf8)), value.isObject else {
            throw ValidationError("the data must be a JSON object, e.g. '{\"text\": \"hello\"}'")
        }
    }

    func run() async throws {
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(data.utf8))
        try await withDaemon(connection) { daemon in
            let snapshot = try await daemon.update(collection: collection, id: id, data: value, ifVersion: ifVersion, merge: merge)
            print(json ? jsonText(snapshot) : "\(snapshot.collection)/\(snapshot.id) is now at version \(snapshot.version)")
        }
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete an object through the daemon; its observers see it go.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The object's collection.") var collection: String
    @Argument(help: "The object's id.") var id: String
    @Option(help: "Delete only if the stored version is exactly this.") var ifVersion: Int64?

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let version = try await daemon.delete(collection: collection, id: id, ifVersion: ifVersion)
            print("\(collection)/\(id) deleted (version \(version))")
        }
    }
}
