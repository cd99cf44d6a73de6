// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateConfig
import Testing

/// `livegated.conf(5)` (written by hand) and the example configuration describe every setting the daemon
/// reads, and only those.
@Suite struct ConfigManualTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func theManualPageDescribesEverySettingAndNoOther() throws {
        let page = try String(contentsOfFile: Self.repository + "/man/livegated.conf.5", encoding: .utf8)
        // Each setting is an item: `.It Cm name = Ar value`, or a pair: `.It Cm a = Ar list , Cm b = Ar list`.
        var described: Set<String> = []
        for line in page.split(separator: "\n") where line.hasPrefix(".It Cm ") {
            let words = line.split(separator: " ")
            for (index, word) in words.enumerated() where word == "Cm" && index + 2 < words.count && words[index + 2] == "=" {
                described.insert(String(words[index + 1]))
            }
        }
        #expect(described == Set(ConfigFile.names), "described: \(described.sorted()), read: \(ConfigFile.names.sorted())")
    }

    @Test func theExampleShowsEverySetting() throws {
        let example = try String(contentsOfFile: Self.repository + "/systemd/livegated.conf.example", encoding: .utf8)
        let shown = Set(
            example.split(separator: "\n").compactMap { line -> String? in
                let text = line.hasPrefix("# ") ? line.dropFirst(2) : line[...]
                guard let equals = text.firstIndex(of: " "), text[equals...].hasPrefix(" = ") else { return nil }
                return String(text[..<equals])
            }
        )
        #expect(shown == Set(ConfigFile.names), "shown: \(shown.sorted())")
    }
}
