// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveSDK

/// A cache in a directory of its own, for the tests that drive a `CacheStore` directly.
enum TemporaryCache {
    /// Opens a cache in a new directory (``discard(_:_:)`` closes it and removes the directory).
    static func open() throws -> (CacheStore, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return (try CacheStore.open(path: directory + "/cache.sqlite", monitor: StorageMonitor()).0, directory)
    }

    static func discard(_ cache: CacheStore, _ directory: String) {
        try? cache.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
