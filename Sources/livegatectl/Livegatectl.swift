// Licensed under the Apache License, Version 2.0.

import ArgumentParser
import Foundation
import LiveGateClient
import LiveGateProtocol
import LiveGateVersion
import LiveJSON

/// Exit codes (also in `livegatectl --help`):
/// 0 success · 1 the daemon answered with an error · 64 usage error (EX_USAGE) · 3 the daemon could not be reached or
/// closed the connection · 77 the daemon's access policy refused this user (EX_NOPERM).
@main
struct Livegatectl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livegatectl",
        abstract: "Talk to livegated: watch live objects and collections, write them, use streams, show the daemon's status.",
        discussion: """
            Exit codes: 0 success; 1 the daemon answered with an error; 64 usage error (EX_USAGE); \
            3 the daemon could not be reached or closed the connection; 77 the daemon's access policy refused \
            this user (EX_NOPERM). The socket is --socket, else $LIVEGATE_SOCKET, else /run/livegate/livegate.sock.
            """,
        version: LiveGateVersion.current,
        subcommands: [
            Status.self, Get.self, Watch.self, List.self, Put.self, Patch.self, Delete.self, Stream.self, Stats.self, Clients.self,
            LogLevel.self,
        ]
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
        throw ExitCode(exitCode(for: error))
    }
}

/// Runs `watch` on a connection and, when the daemon closes it (it restarts, or is upgraded), says so on
/// stderr and runs it again on a new connection once the daemon is back, until `watch` returns (as
/// `journalctl -f` follows a rotated journal). Without `reconnect`, or when the first connection cannot be
/// made, the failure ends the command as ``withDaemon(_:_:)`` does.
func watchAcrossRestarts(_ options: ConnectionOptions, reconnect: Bool, _ watch: (LiveGateConnection, _ again: Bool) async throws -> Void)
    async throws
{
    var connected = false
    var lost = false
    var attempt = 0
    while true {
        do {
            try await LiveGateConnection.withConnection(socketPath: options.socket, client: "livegatectl") { daemon in
                if lost { FileHandle.standardError.write(Data("livegatectl: connected to livegated again; watching on\n".utf8)) }
                connected = true
                attempt = 0
                try await watch(daemon, lost)
            }
            return
        } catch let error as LiveGateError where reconnect && connected && error.kind == .connection {
            if !lost || attempt == 0 {
                FileHandle.standardError.write(Data("livegatectl: \(error.message) (reconnecting; --no-reconnect ends instead)\n".utf8))
            }
            lost = true
            attempt += 1
            // 0.1 s doubling to 2 s: a restart takes about a second.
            try await Task.sleep(for: .milliseconds(min(2000, 100 << min(attempt - 1, 5))))
        } catch let error as LiveGateError {
            FileHandle.standardError.write(Data("livegatectl: \(error.message)\n".utf8))
            throw ExitCode(exitCode(for: error))
        }
    }
}

/// The documented exit code for a failure (see ``Livegatectl``).
func exitCode(for error: LiveGateError) -> Int32 {
    switch error.kind {
    case .refused: error.code == .notPermitted ? 77 : 3
    case .connection: 3
    case .daemon: error.code == .limitExceeded ? 3 : 1
    case .client: 1
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
        abstract: "Watch a live object, or a query's result: print the state now and at every change.",
        discussion: """
            With an id, watches that object; without, the collection's objects that match --where, in \
            --sort order, in pages; with --feed, every change of the collection as it happens. Runs until \
            interrupted, or until --until-version (objects) or --count (feeds) is reached. When the daemon \
            closes the connection (it restarts), says so on stderr, reconnects once it is back and watches on: \
            an object from the last version shown (a skipped version comes with a resync line, nothing is \
            shown twice), a query's window whole again, a feed with a line saying that changes meanwhile may \
            have been missed. Example: livegatectl watch messages --where channel='"c1"' --sort rank --pages 2
            """
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The collection.") var collection: String
    @Argument(help: "The object's id (omit to watch the collection).") var id: String?
    @OptionGroup var query: QueryOptions
    @Flag(help: "One JSON line per change (the daemon's notification params).") var json = false
    @Flag(help: "Wait for fresh data: skip the cached version (objects).") var freshOnly = false
    @Option(help: "Exit once a snapshot with at least this version has been shown (objects).") var untilVersion: Int64?
    @Flag(help: "Print every change of the collection as it happens (a feed), instead of a query's window.") var feed = false
    @Option(help: "With --feed: exit after this many changes.") var count: Int?
    @Flag(help: "End when the daemon closes the connection (exit code 3), instead of reconnecting and watching on.") var noReconnect = false

    func validate() throws {
        if feed && id != nil { throw ValidationError("--feed watches a whole collection: give no id") }
        if count != nil && !feed { throw ValidationError("--count applies to --feed") }
    }

    func run() async throws {
        if feed {
            var changes = 0
            try await watchAcrossRestarts(connection, reconnect: !noReconnect) { daemon, again in
                if again, !json { print("(livegated restarted: changes made meanwhile may have been missed)") }
                try await watchFeed(daemon, collection: collection, json: json, count: count, changes: &changes)
            }
            return
        }
        guard let id else {
            try await watchAcrossRestarts(connection, reconnect: !noReconnect) { daemon, _ in
                try await watchCollection(daemon, collection: collection, query: query, json: json, untilLoaded: false)
            }
            return
        }
        // The last version shown: observed again from there after a restart, so nothing is shown twice.
        var shown: Int64?
        try await watchAcrossRestarts(connection, reconnect: !noReconnect) { daemon, _ in
            let observation = try await daemon.observeObject(
                collection: collection,
                id: id,
                policy: freshOnly ? .freshOnly : nil,
                sinceVersion: shown
            )
            for try await change in observation.changes {
                print(json ? Self.jsonLine(change) : Self.describe(change))
                fflush(nil)
                if let version = change.snapshot?.version { shown = version }
                if let untilVersion, let version = change.snapshot?.version, version >= untilVersion { return }
            }
        }
    }

    /// Prints each feed event, readable or as JSON, until `count` changes in all (`changes` counts them).
    func watchFeed(_ daemon: LiveGateConnection, collection: String, json: Bool, count: Int?, changes: inout Int) async throws {
        let subscription = try await daemon.subscribeFeed(collection: collection)
        for try await event in subscription.events {
            if json {
                print(jsonText(event))
            } else {
                switch event.event {
                case .ready: print("(watching every change of \(collection))")
                case .next:
                    let snapshot = event.snapshot
                    let what = event.deleted == true ? "deleted" : jsonText(snapshot?.data ?? .null)
                    print("\(snapshot?.collection ?? collection)/\(snapshot?.id ?? "?") v\(snapshot?.version ?? 0): \(what)")
                case .status: print("(link to the cloud: \(event.status ?? "?"))")
                case .resync: print("(the link was down too long: changes may have been missed)")
                case .error: print("error: \(event.error?.message ?? "?")")
                }
            }
            fflush(nil)
            if event.event == .next {
                changes += 1
                if let count, changes >= count { return }
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

/// What selects and orders a collection's objects.
struct QueryOptions: ParsableArguments {
    @Option(name: .customLong("where"), help: "FIELD=JSON: only objects whose FIELD equals the JSON value (repeatable).")
    var filters: [String] = []
    @Option(help: "Order by this field (then by id).") var sort: String?
    @Flag(help: "Descending order.") var descending = false
    @Option(help: "Items per page, 1-100.") var pageSize: Int = 20
    @Option(help: "How many pages to load.") var pages: Int = 1
    @Flag(help: "Start from the last page (and page backwards).") var last = false

    func validate() throws {
        _ = try params()
        guard (1...1000).contains(pages) else { throw ValidationError("--pages must be from 1 to 1000") }
    }

    func params() throws -> QueryParams {
        var filters: [String: JSONValue] = [:]
        for filter in self.filters {
            guard let equals = filter.firstIndex(of: "=") else {
                throw ValidationError("--where takes FIELD=JSON, e.g. channel='\"c1\"' or rank=3, not \(filter)")
            }
            let text = String(filter[filter.index(after: equals)...])
            let value: JSONValue
            do {
                value = try JSONValue(parsing: text)
            } catch {
                throw ValidationError("--where \(filter): the value must be JSON (quote strings: channel='\"c1\"'): \(error)")
            }
            filters[String(filter[..<equals])] = value
        }
        return QueryParams(where: filters.isEmpty ? nil : filters, sort: sort.map { SortParams(field: $0, descending: descending ? true : nil) })
    }
}

/// Observes a collection's window of `--pages` pages and prints it at every change (or, with `untilLoaded`,
/// once it has loaded).
func watchCollection(_ daemon: LiveGateConnection, collection: String, query: QueryOptions, json: Bool, untilLoaded: Bool) async throws {
    let observation = try await daemon.observeCollection(
        collection: collection,
        query: try query.params(),
        pageSize: query.pageSize,
        anchor: query.last ? .last : nil,
        pages: query.pages > 1 ? query.pages : nil
    )
    for try await update in observation.updates {
        let change = update.change
        let loaded = change.loadingStatus == .loaded || change.loadingStatus == .error
        if untilLoaded {
            guard loaded else { continue }
            print(json ? jsonText(update.items) : describe(update))
            return
        }
        if json {
            print(
                jsonText(
                    CollectionChangedBody(
                        count: change.count,
                        size: change.size,
                        changes: change.changes,
                        items: change.items,
                        hasNext: change.hasNext,
                        hasPrevious: change.hasPrevious,
                        dataStatus: change.dataStatus,
                        loadingStatus: change.loadingStatus,
                        error: change.error,
                        resync: change.resync,
                        reset: change.reset
                    )
                )
            )
        } else {
            print(describe(update))
        }
        fflush(nil)
    }
}

func describe(_ update: CollectionUpdate) -> String {
    let change = update.change
    var flags = [change.dataStatus.rawValue, change.loadingStatus.rawValue]
    if change.resync == true { flags.append("resync") }
    if change.hasPrevious { flags.append("more before") }
    if change.hasNext { flags.append("more after") }
    var lines = ["\(change.size) of \(change.count) [\(flags.joined(separator: ", "))]"]
    for (index, item) in update.items.enumerated() {
        lines.append("  \(index): \(item.id) v\(item.version) \(jsonText(item.data))")
    }
    if let error = change.error { lines.append("  error: \(error.message)") }
    return lines.joined(separator: "\n")
}

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an object's current data, as the cloud has it (or the daemon's cache, with --local)."
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The object's collection.") var collection: String
    @Argument(help: "The object's id.") var id: String
    @Flag(help: "Accept the daemon's cached version when it has one.") var local = false
    @Flag(help: "Print the daemon's object.changed params as JSON.") var json = false

    func run() async throws {
        try await withDaemon(connection) { daemon in
            let observation = try await daemon.observeObject(collection: collection, id: id, policy: local ? nil : .freshOnly, once: true)
            for try await change in observation.changes {
                print(json ? Watch.jsonLine(change) : Watch.describe(change))
                if change.snapshot == nil, change.error == nil { throw ExitCode(1) }
                return
            }
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a collection's objects that match --where, in --sort order, for --pages pages.",
        discussion: "Example: livegatectl list messages --where channel='\"c1\"' --sort rank --descending --page-size 10"
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The collection.") var collection: String
    @OptionGroup var query: QueryOptions
    @Flag(help: "Print the items as a JSON array of snapshots.") var json = false

    func run() async throws {
        try await withDaemon(connection) { daemon in
            try await watchCollection(daemon, collection: collection, query: query, json: json, untilLoaded: true)
        }
    }
}

struct Patch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge a JSON merge patch into an object's data (null removes a member).",
        discussion: "Example: livegatectl patch notes n1 '{\"done\": true}'"
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The object's collection.") var collection: String
    @Argument(help: "The object's id.") var id: String
    @Argument(help: "The patch: a JSON object.") var data: String
    @Option(help: "Patch only if the stored version is exactly this.") var ifVersion: Int64?

    func validate() throws {
        _ = try jsonObjectArgument(data, what: "the patch", example: #"'{"done": true}'"#)
    }

    func run() async throws {
        let value = try jsonObjectArgument(data, what: "the patch", example: #"'{"done": true}'"#)
        try await withDaemon(connection) { daemon in
            let snapshot = try await daemon.update(collection: collection, id: id, data: value, ifVersion: ifVersion, merge: true)
            print("\(snapshot.collection)/\(snapshot.id) is now at version \(snapshot.version)")
        }
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
        _ = try jsonObjectArgument(data, what: "the data", example: #"'{"text": "hello"}'"#)
    }

    func run() async throws {
        let value = try jsonObjectArgument(data, what: "the data", example: #"'{"text": "hello"}'"#)
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

/// A JSON object given as an argument, read with LiveJSON's parser: its nesting is bounded as the daemon's is
/// (Foundation's decoder stopped the program on 513 unclosed brackets).
func jsonObjectArgument(_ text: String, what: String, example: String) throws -> JSONValue {
    let value: JSONValue
    do {
        value = try JSONValue(parsing: text)
    } catch {
        throw ValidationError("\(what) must be a JSON object, e.g. \(example): \(error)")
    }
    guard value.isObject else { throw ValidationError("\(what) must be a JSON object, e.g. \(example)") }
    return value
}
