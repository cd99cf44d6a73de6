// Licensed under the Apache License, Version 2.0.

import LiveChangeSet
import SeededRandom
import Testing

struct Item: Hashable {
    let id: Int
    let version: Int
}

@Suite("Change sets")
struct ChangeSetTests {
    /// A random next result: some items leave, some arrive, some change, the order is partly shuffled.
    static func randomPair(_ random: inout SeededGenerator) -> (old: [Item], new: [Item]) {
        let universe = Int.random(in: 0...40, using: &random)
        let old = (0..<universe).filter { _ in Bool.random(using: &random) }.shuffled(using: &random).map { Item(id: $0, version: 1) }
        var new = old.filter { _ in Int.random(in: 0..<5, using: &random) > 0 }
        for id in universe..<(universe + Int.random(in: 0...6, using: &random)) {
            new.insert(Item(id: id, version: 1), at: Int.random(in: 0...new.count, using: &random))
        }
        for _ in 0..<Int.random(in: 0...4, using: &random) where new.count > 1 {
            let from = Int.random(in: 0..<new.count, using: &random)
            let item = new.remove(at: from)
            new.insert(item, at: Int.random(in: 0...new.count, using: &random))
        }
        for index in new.indices where Int.random(in: 0..<4, using: &random) == 0 {
            new[index] = Item(id: new[index].id, version: new[index].version + 1)
        }
        return (old, new)
    }

    static func changes(_ old: [Item], _ new: [Item]) -> ChangeSet {
        ChangeSet.between(old: old.map(\.id), new: new.map(\.id)) { old[$0].version != new[$1].version }
    }

    @Test("applying the change set to the old result gives the new one, for 5,000 random pairs")
    func batchApplication() {
        var random = SeededGenerator(seed: 20_261_122)
        for round in 0..<5_000 {
            let (old, new) = Self.randomPair(&random)
            let changes = Self.changes(old, new)
            let rebuilt = changes.apply(to: old) { new[$0] }
            #expect(rebuilt == new, "round \(round): \(old) → \(new) with \(changes)")
            // Both coordinates name the same item.
            for pair in changes.modifications + changes.moves { #expect(old[pair.old].id == new[pair.new].id) }
            for index in changes.deletions { #expect(!new.contains { $0.id == old[index].id }) }
            for index in changes.insertions { #expect(!old.contains { $0.id == new[index].id }) }
            #expect(changes.modifications.allSatisfy { old[$0.old].version != new[$0.new].version })
        }
    }

    @Test("the steps, applied one at a time, give the new result, with every index valid when used")
    func sequentialApplication() {
        var random = SeededGenerator(seed: 7)
        for round in 0..<5_000 {
            let (old, new) = Self.randomPair(&random)
            var list = old
            for step in Self.changes(old, new).steps {
                switch step {
                case .remove(let index):
                    #expect(list.indices.contains(index), "round \(round)")
                    guard list.indices.contains(index) else { break }
                    list.remove(at: index)
                case .insert(let index):
                    #expect((0...list.count).contains(index), "round \(round)")
                    guard (0...list.count).contains(index) else { break }
                    list.insert(new[index], at: index)
                case .reload(let index):
                    list[index] = new[index]
                }
            }
            #expect(list == new, "round \(round)")
        }
    }

    @Test("moves are minimal: one item carried to the front is one move, not n")
    func minimalMoves() {
        let changes = ChangeSet.between(old: [1, 2, 3, 4, 5], new: [5, 1, 2, 3, 4])
        #expect(changes.moves == [IndexPair(4, 0)])
        #expect(changes.deletions.isEmpty && changes.insertions.isEmpty)
        #expect(ChangeSet.between(old: [1, 2, 3], new: [1, 2, 3]).isEmpty)
    }

    @Test("a change set computed for 10,000 items applies back exactly")
    func large() {
        var random = SeededGenerator(seed: 3)
        let old = Array(0..<10_000)
        var new = old.filter { _ in Int.random(in: 0..<10, using: &random) > 0 }
        new.insert(contentsOf: 10_000..<10_500, at: 100)
        new.swapAt(5, 8_000)
        let changes = ChangeSet.between(old: old, new: new)
        #expect(changes.apply(to: old) { new[$0] } == new)
        #expect(changes.moves.count == 2)
    }
}
