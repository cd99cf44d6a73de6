// Licensed under the Apache License, Version 2.0.

import Logging
import NIOCore
import Synchronization

/// The last notification body encoded, by what it encodes (an emission, a message's sequence number): the
/// SDK calls every observer of one change in a row, so a one-entry cache is all it takes for a change to be
/// encoded once, whatever the number of tokens. Counts the encodings, for `daemon.stats`.
final class EncodedOnce<Key: Equatable & Sendable>: Sendable {
    private struct Entry {
        let key: Key
        let body: ByteBuffer
    }

    private let last = Mutex<Entry?>(nil)
    private let encodings = Atomic<Int>(0)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// How many bodies were encoded.
    var count: Int { encodings.load(ordering: .relaxed) }

    /// The body of `key`: the cached one when it was the last encoded, else `encode()`'s (logged and `nil`
    /// when it fails).
    func body(_ key: Key, _ encode: () throws -> ByteBuffer) -> ByteBuffer? {
        if let cached = last.withLock({ $0?.key == key ? $0?.body : nil }) { return cached }
        do {
            let body = try encode()
            encodings.add(1, ordering: .relaxed)
            last.withLock { $0 = Entry(key: key, body: body) }
            return body
        } catch {
            logger.error("could not encode a notification", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
