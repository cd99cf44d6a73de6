// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateSystemd
import Testing

/// The journal's message catalog (`systemd/livegate.catalog`, for `journalctl -x`) explains every
/// `MESSAGE_ID` the daemon logs, and nothing else; systemd's own compiler accepts it.
@Suite struct MessageCatalogTests {
    static let catalogPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("systemd/livegate.catalog").path

    /// The catalog's entries: ID → the lines after its `-- ID` header.
    static func entries() throws -> [String: [String]] {
        let text = try String(contentsOfFile: catalogPath, encoding: .utf8)
        var entries: [String: [String]] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("-- ") {
                let id = String(line.dropFirst(3))
                #expect(entries[id] == nil, "\(id) explained twice")
                entries[id] = []
                current = id
            } else if let current {
                entries[current]?.append(String(line))
            }
        }
        return entries
    }

    @Test func everyMessageIDIsExplainedOnceWithASubjectAndAnAdminsNextStep() throws {
        let entries = try Self.entries()
        #expect(Set(entries.keys) == Set(LogMessageID.all), "the catalog and LogMessageID list the same IDs")
        #expect(Set(LogMessageID.all).count == LogMessageID.all.count, "no ID is used twice")
        for id in LogMessageID.all {
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit) && id == id.lowercased(), "\(id) is a 128-bit ID in hex")
            let lines = entries[id] ?? []
            #expect(lines.contains { $0.hasPrefix("Subject: ") }, "\(id) has a subject")
            #expect(lines.contains("Defined-By: livegate"), "\(id) says who defines it")
            let body = lines.drop { !$0.isEmpty }.joined(separator: " ")
            #expect(body.count > 80, "\(id) explains what happened and what to do: \(body)")
        }
    }

    @Test func journalctlCompilesTheCatalog() throws {
        let journalctl = ["/usr/bin/journalctl", "/bin/journalctl"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let path = try #require(journalctl, "journalctl (the systemd package) is installed where the tests run")
        let root = NSTemporaryDirectory() + "livegate-catalog-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/usr/lib/systemd/catalog", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.catalogPath, toPath: root + "/usr/lib/systemd/catalog/livegate.catalog")
        func run(_ arguments: [String]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = ["--root=\(root)"] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }
        let (updated, updateOutput) = try run(["--update-catalog"])
        #expect(updated == 0, "\(updateOutput)")
        let (listed, list) = try run(["--list-catalog"])
        #expect(listed == 0)
        let ids = Set(list.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        #expect(ids == Set(LogMessageID.all), "compiled: \(list)")
    }
}
