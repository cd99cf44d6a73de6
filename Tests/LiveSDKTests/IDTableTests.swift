// Licensed under the Apache License, Version 2.0.

import LiveSDK
import SeededRandom
import Testing

@Suite struct IDTableTests {
    func contents(_ table: inout IDTable<Int64>) -> [Int: Int64] {
        var seen: [Int: Int64] = [:]
        table.updateEach { id, value in seen[id] = value }
        return seen
    }

    /// Against a dictionary (the model) over a seeded random series of inserts, removals and changes in place,
    /// through the inline one and back: the same members and values at every step.
    @Test func keepsWhatADictionaryKeepsThroughEveryShape() {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(seed: seed)
        var table = IDTable<Int64>()
        var model: [Int: Int64] = [:]
        for step in 0..<5_000 {
            let id = Int(random.next() % 5)
            switch random.next() % 4 {
            case 0, 1:
                table.insert(Int64(step), id: id)
                model[id] = Int64(step)
            case 2:
                #expect(table.remove(id) == model.removeValue(forKey: id), "seed \(seed), step \(step)")
            default:
                table.updateEach { _, value in value += 1 }
                for key in model.keys { model[key]! += 1 }
            }
            #expect(table.count == model.count && table.isEmpty == model.isEmpty, "seed \(seed), step \(step)")
            #expect(contents(&table) == model, "seed \(seed), step \(step)")
        }
    }
}
