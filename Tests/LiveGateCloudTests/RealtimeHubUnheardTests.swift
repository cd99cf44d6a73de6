// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveGateCloud
import LiveJSON
import SeededRandom
import Testing

/// PostgreSQL's event pump skips decoding a write nobody listens to (``RealtimeHub/publishUnheard(seq:collection:id:)``).
/// Checked over random schedules of subscriptions and writes against a model of who listens, kept apart from the
/// hub: a write is skipped exactly when no subscriber holds its object's topic, its collection's or a query topic of
/// its collection, and never for a stream's collection; a skipped write counts as published (a subscription made
/// after it is acked at its seq or later, so a resumption replays it from the log).
@Suite struct RealtimeHubUnheardTests {
    @Test(arguments: 0..<20) func aWriteIsSkippedExactlyWhenNobodyListens(seed: UInt64) async throws {
        var random = SeededGenerator(seed: 0x5C1B_0000 + seed)
        let hub = RealtimeHub()
        let collections = ["c1", "c2", "$stream/s"]
        let ids = ["a", "b", "c"]
        let topics: [Topic] =
            ["c1", "c2"].flatMap { collection in
                ids.map { Topic.object(EntityKey(collection: collection, id: $0)) } + [
                    .collection(collection), .query(collection, where: ["k": .string("v")]),
                ]
            }
        let subscribers = (0..<3).map { _ in hub.connect(user: "u") }
        // The model: which subscriber holds which topic.
        var held: [Int: Set<Topic>] = [:]
        var seq: Int64 = 0
        var lastPublished: Int64 = 0
        var ref: Int64 = 0
        for step in 0..<300 {
            let subscriber = Int.random(in: 0..<subscribers.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                let topic = topics.randomElement(using: &random)!
                ref += 1
                hub.subscribe(subscribers[subscriber], to: topic, ref: ref)
                held[subscriber, default: []].insert(topic)
            case 1:
                guard let topic = held[subscriber]?.randomElement(using: &random) else { continue }
                hub.unsubscribe(subscribers[subscriber], from: topic, ack: "")
                held[subscriber]?.remove(topic)
            default:
                let collection = collections.randomElement(using: &random)!
                let id = ids.randomElement(using: &random)!
                seq += 1
                let listened = held.values.contains { topics in
                    topics.contains { topic in
                        switch topic {
                        case .object(let key): key == EntityKey(collection: collection, id: id)
                        case .collection(let name), .query(let name, _): name == collection
                        default: false
                        }
                    }
                }
                let skipped = hub.publishUnheard(seq: seq, collection: collection, id: id)
                #expect(skipped == (!listened && !collection.hasPrefix("$")), "seed \(seed) step \(step): \(collection)/\(id)")
                if skipped { lastPublished = seq }
            }
        }
        // A new subscription is acked at the last write skipped (nothing else was published).
        let late = hub.connect(user: "u")
        hub.subscribe(late, to: .collection("c9"), ref: 1)
        var messages = late.messages.makeAsyncIterator()
        let ack = try CloudJSON.decodeRealtimeMessage(from: try #require(await messages.next()))
        #expect(ack.op == .ack && ack.seq == lastPublished, "seed \(seed)")
    }
}
