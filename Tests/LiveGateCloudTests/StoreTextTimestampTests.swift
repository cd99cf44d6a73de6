// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateCloud
import Testing

/// Every object's `createdAt` and `updatedAt`: written by hand, the text Foundation's ISO 8601 format style wrote.
@Suite struct StoreTextTimestampTests {
    private static func foundation(_ date: Date) -> String { StoreText.foundationTimestamp(date) }

    @Test func theSameTextAsFoundationsFormatStyleForTimesAcrossFourCenturies() {
        var generator = SystemRandomNumberGenerator()
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 0.0009), Date(timeIntervalSince1970: 0.9999),
            Date(timeIntervalSince1970: 951_782_400.5),  // 2000-02-29
            Date(timeIntervalSince1970: 4_107_542_399.999),  // 2099-12-31T23:59:59.999
            Date(timeIntervalSince1970: -1.5), Date(timeIntervalSince1970: -2_208_988_800),  // 1900-01-01
            Date(),
        ]
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -6_000_000_000...9_000_000_000, using: &generator)))
        }
        for _ in 0..<2_000 {
            // Whole milliseconds, as the clock reads them: the case every write has.
            dates.append(Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_000_000_000_000, using: &generator)) / 1000))
        }
        var differences: [String] = []
        for date in dates where StoreText.timestamp(date) != Self.foundation(date) {
            differences.append("\(date.timeIntervalSince1970): \(StoreText.timestamp(date)) != \(Self.foundation(date))")
        }
        #expect(differences.isEmpty, "\(differences.count) differ, e.g. \(differences.prefix(5))")
    }
}
