// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON
import Logging

/// The social model of the reference documents as data in generic collections: users, communities and their
/// members, channels and messages, posts with comments and reactions, follows. For demos and manual tests.
public enum DemoSeed {
    /// Writes the demo data into `storage` (creating a SQLite file if needed); objects that exist already
    /// are left as they are. Returns how many objects it created. Every write is an event in the log, as if
    /// a user had made it.
    public static func write(into storage: CloudStorage, logger: Logger) async throws -> Int {
        try await storage.withStore(logger: logger) { store in
            var created = 0
            for (collection, id, data) in entities {
                let outcome = try await store.write(
                    EntityKey(collection: collection, id: id),
                    .replace(data),
                    ifVersion: 0,
                    idempotency: nil,
                    confirmingGrant: nil
                )
                if case .created = outcome { created += 1 }
            }
            return created
        }
    }

    static var entities: [(String, String, JSONValue)] {
        let people = ["alice", "bob", "carol", "dave"]
        var all: [(String, String, JSONValue)] = []
        for (index, name) in people.enumerated() {
            all.append(
                ("users", name, ["displayName": .string(name.prefix(1).uppercased() + name.dropFirst()), "joined": .integer(2020 + index)])
            )
        }
        all.append(("communities", "swift", ["name": "Swift on Linux", "isPublic": true]))
        all.append(("communities", "gardening", ["name": "Gardening", "isPublic": false]))
        for (index, name) in people.enumerated() {
            all.append(
                ("members", "swift-\(name)", ["community": "swift", "user": .string(name), "role": .string(index == 0 ? "moderator" : "member")])
            )
        }
        all.append(("members", "gardening-carol", ["community": "gardening", "user": "carol", "role": "moderator"]))
        all.append(("channels", "general", ["community": "swift", "name": "general", "type": "community"]))
        all.append(("channels", "alice-bob", ["name": "alice & bob", "type": "conversation"]))
        all.append(("channels", "general-releases", ["parent": "general", "name": "releases", "type": "subChannel"]))
        let lines = ["hello everyone", "has anyone tried 6.3?", "yes, the new build is faster", "see the release notes", "thanks!"]
        for (index, text) in lines.enumerated() {
            all.append(
                (
                    "messages", "general-\(index + 1)",
                    [
                        "channel": "general", "author": .string(people[index % people.count]), "text": .string(text),
                        "sentAt": .integer(index + 1),
                    ]
                )
            )
        }
        all.append(("messages", "alice-bob-1", ["channel": "alice-bob", "author": "alice", "text": "lunch?", "sentAt": 1]))
        all.append(("posts", "p1", ["community": "swift", "author": "alice", "text": "Structured concurrency tips", "createdAt": 1]))
        all.append(("posts", "p2", ["community": "swift", "author": "bob", "text": "Benchmarks on two cores", "createdAt": 2]))
        all.append(("comments", "p1-c1", ["post": "p1", "author": "carol", "text": "great list", "createdAt": 3]))
        all.append(("comments", "p1-c2", ["post": "p1", "author": "dave", "text": "+1", "createdAt": 4]))
        all.append(("reactions", "p1-bob-like", ["target": "posts/p1", "user": "bob", "kind": "like"]))
        all.append(("reactions", "p2-alice-love", ["target": "posts/p2", "user": "alice", "kind": "love"]))
        all.append(("follows", "bob-alice", ["follower": "bob", "followee": "alice"]))
        all.append(("follows", "carol-alice", ["follower": "carol", "followee": "alice"]))
        return all
    }
}
