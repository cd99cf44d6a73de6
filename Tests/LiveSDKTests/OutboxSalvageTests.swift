// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import LiveSDK
import Testing

/// A damaged outbox is salvaged at start (``OutboxStore/open(path:monitor:now:)``): the readable writes, in order
/// with their ids and write ids, in a new outbox; the damaged file kept aside as it was.
@Suite struct OutboxSalvageTests {
    /// An outbox of `count` writes (`{"n": i}`, one object) in a directory of its own; its path, and the writes.
    private static func filledOutbox(_ count: Int) async throws -> (directory: String, entries: [OutboxEntry]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvage-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let outbox = try OutboxStore(path: directory + "/outbox.sqlite", monitor: StorageMonitor())
        for n in 1...count {
            _ = try await outbox.enqueue(
                EntityKey(collection: "c", id: "o"),
                .replace(["n": .integer(n), "pad": .string(String(repeating: "p", count: 100))]),
                ifVersion: nil
            )
        }
        let entries = try await outbox.entries()
        try outbox.close()
        return (directory, entries)
    }

    @Test func aWholeOutboxIsNotSalvaged() async throws {
        let (directory, entries) = try await Self.filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (outbox, salvage) = try OutboxStore.open(path: directory + "/outbox.sqlite", monitor: StorageMonitor())
        #expect(salvage == nil)
        #expect(try await outbox.entries() == entries)
    }

    @Test(arguments: [0.5, 0.75, 0.9])
    func aTruncatedOutboxKeepsItsReadableWritesInOrder(keeping fraction: Double) async throws {
        let (directory, entries) = try await Self.filledOutbox(300)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/outbox.sqlite"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(truncate(path, off_t(Double(size) * fraction)) == 0)
        let damaged = try Data(contentsOf: URL(fileURLWithPath: path))

        let (outbox, salvage) = try OutboxStore.open(path: path, monitor: StorageMonitor(), now: Date(timeIntervalSince1970: 1_800_000_000))
        let salvaged = try #require(salvage)
        let kept = try await outbox.entries()
        // Some, not all; each as it was (id, write id, write), in the original order.
        #expect(kept.count == salvaged.salvaged && kept.count > 0 && kept.count < entries.count, "\(kept.count) of \(entries.count)")
        #expect(kept.allSatisfy { entries.contains($0) })
        #expect(kept.map(\.id) == kept.map(\.id).sorted())
        #expect(salvaged.movedTo == path + ".damaged-20270115T080000Z")
        #expect(try Data(contentsOf: URL(fileURLWithPath: salvaged.movedTo)) == damaged)
        // New writes go after the salvaged ones.
        let next = try await outbox.enqueue(EntityKey(collection: "c", id: "o"), .delete, ifVersion: nil)
        #expect(next > (kept.last?.id ?? 0))
        // No temporary file is left behind.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(left == ["outbox.sqlite", "outbox.sqlite.damaged-20270115T080000Z"], "\(left)")
    }

    @Test(arguments: ["emptied", "random bytes", "text"])
    func anUnreadableOutboxIsSetAsideAndANewOneMade(_ damage: String) async throws {
        let (directory, _) = try await Self.filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/outbox.sqlite"
        switch damage {
        case "emptied": #expect(truncate(path, 0) == 0)
        case "random bytes":
            var generator = SystemRandomNumberGenerator()
            try Data((0..<8192).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: path))
        default: try Data(String(repeating: "text\n", count: 1000).utf8).write(to: URL(fileURLWithPath: path))
        }
        let (outbox, salvage) = try OutboxStore.open(path: path, monitor: StorageMonitor())
        let salvaged = try #require(salvage)
        #expect(salvaged.salvaged == 0 && salvaged.unreadable == nil)
        #expect(try await outbox.entries().isEmpty)
        #expect(FileManager.default.fileExists(atPath: salvaged.movedTo))
        // The new outbox works, and opens whole the next time.
        _ = try await outbox.enqueue(EntityKey(collection: "c", id: "o"), .delete, ifVersion: nil)
        try outbox.close()
        let (again, none) = try OutboxStore.open(path: path, monitor: StorageMonitor())
        #expect(none == nil)
        #expect(try await again.entries().count == 1)
    }
}
