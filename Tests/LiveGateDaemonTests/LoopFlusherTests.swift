// Licensed under the Apache License, Version 2.0.

import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import LiveGateDaemon

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
}
