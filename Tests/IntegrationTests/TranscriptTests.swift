// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import Testing

/// Replays `Protocol/ipc/transcripts/*.transcript` against the real daemon, byte for byte.
@Suite(.serialized) struct TranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Protocol/ipc/transcripts")

    static var transcripts: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }
            .sorted()
    }

    /// Every message in the transcripts (so every kind the daemon wrote there) matches the JSON Schema.
    @Test func transcriptsMatchTheJSONSchema() throws {
        let check = try runToCompletion("/usr/bin/python3", [packageRoot + "/scripts/check-protocol-schema"])
        #expect(check.status == 0, "\(check.output)")
    }

    @Test func thereAreTranscripts() {
        #expect(Self.transcripts.count >= 2)
    }

    @Test(arguments: TranscriptTests.transcripts)
    func replay(_ name: String) async throws {
        let text = try String(contentsOf: Self.directory.appendingPathComponent(name), encoding: .utf8)
        let cluster = try await TestCluster.start(
            cloudArguments: ["--bcrypt-cost", "4", "--stream", "songs", "--stream-message-limit", "1024"],
            otherUsers: ["bob"]
        )
        defer { cluster.stop() }
        // Transcripts start from a daemon whose realtime link is up: an observation made before it would
        // be fetched again once it is (to prove continuity), adding notifications a transcript cannot fix.
        try await cluster.daemonRealtimeConnected()
        var volatile: [String] = []
        try await RawConnection.with(cluster.socketPath) { raw in
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let where_ = "\(name):\(number + 1)"
                if line.isEmpty || line.hasPrefix("#") { continue }
                if line.hasPrefix("volatile ") {
                    volatile += line.dropFirst("volatile ".count).split(separator: " ").map(String.init)
                } else if line.hasPrefix("cloud put ") {
                    let parts = line.dropFirst("cloud put ".count).split(separator: " ", maxSplits: 2).map(String.init)
                    try #require(parts.count == 3, "\(where_): cloud put COLLECTION ID JSON")
                    let data = try JSONValue(parsing: parts[2])
                    try await cluster.put(parts[0], parts[1], data)
                } else if line.hasPrefix("cloud delete ") {
                    let parts = line.dropFirst("cloud delete ".count).split(separator: " ").map(String.init)
                    try #require(parts.count == 2, "\(where_): cloud delete COLLECTION ID")
                    try await cluster.delete(parts[0], parts[1])
                } else if line.hasPrefix("cloud send ") {
                    let parts = line.dropFirst("cloud send ".count).split(separator: " ", maxSplits: 3).map(String.init)
                    try #require(parts.count == 4, "\(where_): cloud send SENDER STREAM RECIPIENT JSON")
                    let sent = try await cluster.call(
                        .POST,
                        CloudPath.streamMessages(parts[1], user: parts[2]),
                        json: #"{"message":\#(parts[3])}"#,
                        token: try await cluster.login(as: parts[0])
                    )
                    try #require(sent.status == 201, "\(where_): \(sent.body)")
                } else if line.hasPrefix("cloud acl ") {
                    let parts = line.dropFirst("cloud acl ".count).split(separator: " ", maxSplits: 2).map(String.init)
                    try #require(parts.count == 3, "\(where_): cloud acl USER STREAM JSON")
                    let set = try await cluster.call(
                        .PUT,
                        CloudPath.streamACL(parts[1], user: parts[0]),
                        json: parts[2],
                        token: try await cluster.login(as: parts[0])
                    )
                    try #require(set.status == 200, "\(where_): \(set.body)")
                } else if line.hasPrefix("> ") {
                    try await raw.send(String(line.dropFirst(2)))
                } else if line.hasPrefix("< ") {
                    let expected = Self.normalize(String(line.dropFirst(2)), volatile: volatile)
                    let actual = Self.normalize(try await raw.next(), volatile: volatile)
                    #expect(actual == expected, "\(where_)")
                    if actual != expected { return }
                } else {
                    Issue.record("\(where_): unknown directive \(line)")
                    return
                }
            }
        }
    }

    /// Replaces the scalar value of every member named in `volatile` by `"<volatile>"`.
    static func normalize(_ line: String, volatile: [String]) -> String {
        var result = line
        for name in volatile {
            let pattern = "\"\(NSRegularExpression.escapedPattern(for: name))\":(\"(?:[^\"\\\\]|\\\\.)*\"|-?[0-9][0-9.eE+-]*|true|false|null)"
            let regex = try! NSRegularExpression(pattern: pattern)
            result = regex.stringByReplacingMatches(
                in: result,
                range: NSRange(result.startIndex..., in: result),
                withTemplate: "\"\(name)\":\"<volatile>\""
            )
        }
        return result
    }
}
