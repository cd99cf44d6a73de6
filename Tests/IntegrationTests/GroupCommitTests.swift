// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import NIOHTTP1
import Synchronization
import Testing

/// The cloud's group commit (Protocol/cloud, Objects: writes made at once share a transaction), on the store
/// the suite runs on: concurrent writes share transactions, and each keeps its own semantics.
@Suite(.serialized) struct GroupCommitTests {
    @Test func concurrentWritesShareTransactionsAndEachKeepsItsPreconditionItsKeyAndItsEvent() async throws {
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        _ = try await cluster.put("gc", "counter", ["n": 0], token: token)
        let before = try await cluster.stats()
        let incrementers = 8
        let increments = 10
        let writers = 24
        let writesEach = 20
        let sharedKeys = 12
        let answers = Answers()

        try await withRealtimeConnection(to: cluster.cloudURL, token: token) { send, next in
            try await send(RealtimeClientMessage(op: .subscribe, ref: 1, topic: .collection("gc")))
            #expect(try await next().op == .ack)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Compare-and-set increments of one counter: each applied one read the version it replaced.
                for _ in 0..<incrementers {
                    group.addTask {
                        var done = 0
                        while done < increments {
                            let read = try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "gc", id: "counter")), token: token)
                            let entity = try JSONDecoder().decode(Entity.self, from: Data(read.body.utf8))
                            guard case .number(let n) = entity.data["n"] else { throw ClusterError("no counter in \(read.body)") }
                            let write = try await cluster.call(
                                .PUT,
                                CloudPath.object(entity.key),
                                json: #"{"data":{"n":\#(n.int64Value! + 1)},"ifVersion":\#(entity.version)}"#,
                                token: token
                            )
                            if write.status == 200 {
                                done += 1
                            } else {
                                #expect(write.status == 409, "\(write.body)")
                            }
                        }
                    }
                }
                // Plain writes, each to objects of its own.
                for w in 0..<writers {
                    group.addTask {
                        for n in 0..<writesEach {
                            let write = try await cluster.call(
                                .PUT,
                                CloudPath.object(EntityKey(collection: "gc", id: "w\(w)-\(n % 4)")),
                                json: #"{"data":{"n":\#(n)}}"#,
                                token: token
                            )
                            #expect(write.status == 200 || write.status == 201, "\(write.body)")
                        }
                    }
                }
                // Each idempotency key sent twice at once: applied once, the other answered as its retry.
                for k in 0..<sharedKeys {
                    for _ in 0..<2 {
                        group.addTask {
                            let write = try await cluster.call(
                                .PUT,
                                CloudPath.object(EntityKey(collection: "gc", id: "k\(k)")),
                                json: #"{"data":{"k":\#(k)}}"#,
                                token: token,
                                headers: [("Idempotency-Key", "shared-\(k)")]
                            )
                            answers.add(k, write.status, write.body)
                        }
                    }
                }
                try await group.waitForAll()
            }

            let counter = try await cluster.call(.GET, CloudPath.object(EntityKey(collection: "gc", id: "counter")), token: token)
            let final = try JSONDecoder().decode(Entity.self, from: Data(counter.body.utf8))
            #expect(final.data["n"] == .integer(incrementers * increments), "no increment lost: \(counter.body)")
            #expect(final.version == Int64(1 + incrementers * increments))
            for (k, pair) in answers.byKey {
                #expect(pair.map(\.status).sorted() == [201, 201], "key \(k): \(pair)")
                #expect(pair[0].body == pair[1].body, "key \(k): the retry answers with the first write's entity")
            }

            // One event per applied write, in seq order; the counter's versions in order, each once.
            let applied = incrementers * increments + writers * writesEach + sharedKeys
            var seqs: [Int64] = []
            var counterVersions: [Int64] = []
            var versions: [String: [Int64]] = [:]
            for _ in 0..<applied {
                let event = try await next()
                guard event.op == .event, let seq = event.seq, let entity = event.entity else {
                    Issue.record("not an event: \(event)")
                    return
                }
                seqs.append(seq)
                if entity.id == "counter" {
                    counterVersions.append(entity.version)
                } else {
                    versions[entity.id, default: []].append(entity.version)
                }
            }
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "events in seq order")
            #expect(counterVersions == Array(2...Int64(1 + incrementers * increments)))
            #expect(versions.values.allSatisfy { $0 == Array(1...Int64($0.count)) }, "each object's versions once, in order")
            #expect((0..<sharedKeys).allSatisfy { versions["k\($0)"] == [1] }, "a shared key applied once")
        }

        let after = try await cluster.stats()
        let writes = after.objectWrites - before.objectWrites
        let transactions = after.writeTransactions - before.writeTransactions
        #expect(writes >= incrementers * increments + writers * writesEach + 2 * sharedKeys)
        #expect(transactions < writes, "writes made at once share transactions: \(writes) writes in \(transactions)")
        print("group commit: \(writes) writes in \(transactions) transactions")
    }

    /// On SQLite the WAL is copied into the database file beside the writer, not in the commit that fills it
    /// (`WALCheckpointer`): 40 objects of 20 KB (each with its event: ~450 pages of WAL, short of both SQLite's
    /// own threshold of 1,000 and the writer's backstop) reach the database file while no write is made, so a
    /// checkpoint other than the writer's ran. (With the writer's own, they stayed in the WAL.)
    @Test func theWALIsCheckpointedBesideTheWriter() async throws {
        guard CloudBackend.default == .sqlite else { return }
        let cluster = try await TestCluster.start(startDaemon: false)
        defer { cluster.stop() }
        let token = try await cluster.login()
        let database = cluster.directory + "/cloud.sqlite"
        @Sendable func size(_ path: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        let before = size(database)
        let padding = String(repeating: "x", count: 20_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<4 {
                group.addTask {
                    for n in 0..<10 {
                        let write = try await cluster.call(
                            .PUT,
                            CloudPath.object(EntityKey(collection: "wal", id: "o\(w)-\(n)")),
                            json: #"{"data":{"pad":"\#(padding)"}}"#,
                            token: token
                        )
                        #expect(write.status == 201, "\(write.body)")
                    }
                }
            }
            try await group.waitForAll()
        }
        try await eventually("the writes reach the database file (\(before) bytes before)", timeout: .seconds(10)) {
            size(database) >= before + 1_000_000
        }
    }
}

/// The answers to the writes sent under a shared idempotency key, by key.
private final class Answers: Sendable {
    private let state = Mutex<[Int: [(status: Int, body: String)]]>([:])
    func add(_ key: Int, _ status: Int, _ body: String) { state.withLock { $0[key, default: []].append((status, body)) } }
    var byKey: [Int: [(status: Int, body: String)]] { state.withLock { $0 } }
}
