// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON

/// A message of the cloud's realtime socket through the decoders the engine uses (an entity's event read member
/// by member from its text, or directly from its parse, LiveJSON's `Decodable`, then Foundation's for what it
/// refuses, but for nesting too deep: ``CloudJSON``). Must hold: none crashes, and where LiveJSON's paths decode,
/// they agree.
enum RealtimeFuzz {
    static func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        let engine = try? CloudJSON.decodeRealtimeMessage(from: text)  // what the engine runs
        let fast = try? JSONValue.parse(text, as: RealtimeServerMessage.self)
        // The engine's direct path for entities' events takes what `Decodable` takes, and reads it alike.
        if let fast {
            try check(engine == fast, "the engine read \(String(describing: engine)) where Decodable read \(fast)")
        }
        // Foundation's decoder, which the general path falls back to for what LiveJSON's decoder refuses, must not
        // crash either; it never sees a document nested too deep (it traps building the error for one). What it reads
        // is not compared: it rounds numbers past 2^53 and keeps the first of a repeated name, where livegate keeps
        // every number exactly and the last (Protocol/ipc, "Values").
        let tooDeep: Bool
        do { _ = try JSONValue(parsing: bytes); tooDeep = false } catch { tooDeep = error.isDepthLimit }
        if !tooDeep { _ = try? JSONDecoder().decode(RealtimeServerMessage.self, from: Data(bytes)) }
    }
}
