// Licensed under the Apache License, Version 2.0.

import Logging
import NIOCore
import Synchronization

/// The last notification encoded, by what it encodes (an emission, a message's sequence number): the engine
/// calls every observer of one change in a row, so a one-entry cache is all it takes for a change to be encoded
/// once, whatever the number of tokens. Counts the encodings, for `daemon.stats`.
final class EncodedOnce<Key: Equatable & Sendable, Encoded: Sendable>: Sendable {
    private struct Entry {
        let key: Key
        let encoded: Encoded
    }

    private let last = Mutex<Entry?>(nil)
    private let encodings = Atomic<Int>(0)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// How many were encoded.
    var count: Int { encodings.load(ordering: .relaxed) }

    /// What `key` encodes to: the cached value when it was the last encoded, else `encode()`'s (logged and `nil`
    /// when it fails).
    func encoded(_ key: Key, _ encode: () throws -> Encoded) -> Encoded? {
        if let cached = last.withLock({ $0?.key == key ? $0?.encoded : nil }) { return cached }
        do {
            let encoded = try encode()
            encodings.add(1, ordering: .relaxed)
            last.withLock { $0 = Entry(key: key, encoded: encoded) }
            return encoded
        } catch {
            logger.error("could not encode a notification", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
