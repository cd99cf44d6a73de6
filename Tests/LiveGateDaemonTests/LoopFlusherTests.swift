// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@Suite struct LoopFlusherTests {
    @Test func everyWriterScheduledBeforeTheFlushRunsOnceInIt() {
        let loop = EmbeddedEventLoop()
        let flusher = LoopFlusher(eventLoop: loop)
        let runs = Mutex<[Int]>([])
        let drains = (1...3).map { writer in LoopFlusher.Drain { runs.withLock { $0.append(writer) } } }
        for drain in drains { flusher.schedule(drain) }
        #expect(runs.withLock { $0 }.isEmpty, "nothing runs before the loop's next task")
        loop.run()
        #expect(runs.withLock { $0 } == [1, 2, 3])
        loop.run()
        #expect(runs.withLock { $0 } == [1, 2, 3], "and nothing again")
    }

    @Test func aWriterScheduledDuringAFlushRunsInTheNextOne() {
        let loop = EmbeddedEventLoop()
        let flusher = LoopFlusher(eventLoop: loop)
        let runs = Mutex<[String]>([])
        let late = LoopFlusher.Drain { runs.withLock { $0.append("late") } }
        flusher.schedule(
            LoopFlusher.Drain {
                runs.withLock { $0.append("first") }
                flusher.schedule(late)
            }
        )
        loop.run()
        #expect(runs.withLock { $0 } == ["first", "late"])
    }

    @Test func aWriterWritesAtOnceOncePerRoundThenJoinsTheFlush() {
        let loop = EmbeddedEventLoop()
        let flusher = LoopFlusher(eventLoop: loop)
        let runs = Mutex<[String]>([])
        let a = LoopFlusher.Drain { runs.withLock { $0.append("a") } }
        let b = LoopFlusher.Drain { runs.withLock { $0.append("b") } }
        flusher.writeNow(a)
        flusher.writeNow(b)
        #expect(runs.withLock { $0 } == ["a", "b"], "each connection's first write of the round is at once")
        // (A writer asks once per wake-up: what the fan-out queues for it meanwhile waits in its outbox.)
        flusher.writeNow(a)
        #expect(runs.withLock { $0 } == ["a", "b"], "a second one waits for the flush")
        loop.run()
        #expect(runs.withLock { $0 } == ["a", "b", "a"])
        flusher.writeNow(a)
        #expect(runs.withLock { $0 } == ["a", "b", "a", "a"], "the flush ended the round: at once again")
        loop.run()
        #expect(runs.withLock { $0 } == ["a", "b", "a", "a"], "and the flush that ends this round has nothing to write")
    }
}
