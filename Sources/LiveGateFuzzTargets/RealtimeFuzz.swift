// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON

/// A message of the cloud's realtime socket through the decoders the engine uses (an entity's event read member
/// by member from its text, or directly from its parse, LiveJSON's `Decodable`, then Foundation's for what it
/// refuses, but for nesting too deep: ``CloudJSON``). Must hold: none crashes, and where they decode, they agree.
enum RealtimeFuzz {
    static func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        let engine = try? CloudJSON.decodeRealtimeMessage(from: text)  // what the engine runs
        let fast = try? JSONValue.parse(text, as: RealtimeServerMessage.self)
        // The engine's direct path for entities' events takes what `Decodable` takes, and reads it alike.
        if let fast {
            try check(engine == fast, "the engine read \(String(describing: engine)) where Decodable read \(fast)")
        }
        // Foundation's decoder never sees a document nested too deep (it traps building the error for one). Where it
        // reads the message too, it reads the same envelope; the data it may round (it holds numbers as `Double`s).
        let tooDeep: Bool
        do { _ = try JSONValue(parsing: bytes); tooDeep = false } catch { tooDeep = error.isDepthLimit }
        let foundation = tooDeep ? nil : try? JSONDecoder().decode(RealtimeServerMessage.self, from: Data(bytes))
        if let fast, let foundation {
            try check(
                fast.op == foundation.op && fast.seq == foundation.seq && fast.ref == foundation.ref && fast.topic == foundation.topic
                    && fast.entity?.key == foundation.entity?.key && fast.entity?.version == foundation.entity?.version,
                "the decoders disagree: \(fast) against \(foundation)"
            )
        }
    }
}
