// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateFuzzTargets
import Testing

/// Every input of `Fuzz/corpus/<target>/` (the seeds, from the transcripts and examples, and every input a
/// fuzzing run found failing, kept as `crash-*` once fixed) through its fuzz target: each property holds.
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/corpus").standardized

    static func inputs(_ target: FuzzTarget) -> [URL] {
        let directory = corpus.appendingPathComponent(target.rawValue)
        return ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test(arguments: FuzzTarget.allCases)
    func everyInputOfTheCorpusHoldsItsProperties(_ target: FuzzTarget) throws {
        let inputs = Self.inputs(target)
        #expect(inputs.count >= 3, "a seed corpus for \(target)")
        for input in inputs {
            #expect(throws: Never.self, "\(input.lastPathComponent)") { try target.run(Array(try Data(contentsOf: input))) }
        }
    }
}
