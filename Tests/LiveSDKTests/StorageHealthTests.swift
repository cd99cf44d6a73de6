// Licensed under the Apache License, Version 2.0.

import LiveSDK
import Testing

/// The storage health's events: a file's first failure (or a failure of another kind) and its recovery are
/// reported, once each; the failures between are counted.
@Suite struct StorageHealthTests {
    @Test func aFileFailingIsReportedOnceAndItsRecoveryWithTheCount() {
        var health = StorageHealth()
        #expect(health.succeeded("cache") == nil, "nothing was failing")
        #expect(health.failed("cache", .full, message: "m1") == .failing(file: "cache", fault: .full, message: "m1"))
        #expect(health.failed("cache", .full, message: "m2") == nil)
        #expect(health.failed("cache", .full, message: "m3") == nil)
        #expect(health.failed("outbox", .full, message: "m4") == .failing(file: "outbox", fault: .full, message: "m4"), "per file")
        #expect(health.failed("cache", .ioError, message: "m5") == .failing(file: "cache", fault: .ioError, message: "m5"), "another kind")
        #expect(health.succeeded("cache") == .recovered(file: "cache", fault: .ioError, failures: 1))
        #expect(health.succeeded("cache") == nil)
        #expect(health.failing.keys.sorted() == ["outbox"])
    }

    @Test func everyFaultHasItsOwnEngineCode() {
        let codes = StorageFault.allCases.map(\.code)
        #expect(Set(codes).count == StorageFault.allCases.count)
        for fault in StorageFault.allCases { #expect(StorageFault(fault.code) == fault) }
        #expect(StorageFault(.cacheFailure) == nil && StorageFault(.cloudUnavailable) == nil)
    }
}
