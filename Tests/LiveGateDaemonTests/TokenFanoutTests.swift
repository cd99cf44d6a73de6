// Licensed under the Apache License, Version 2.0.

import LiveGateDaemon
import LiveSDK
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// Windows, feeds and streams on the fan-out's path: one share per loop, one delivery per emission, and each
/// kind's policy for a client behind.
@Suite struct TokenFanoutTests {
    let loop = EmbeddedEventLoop()

    func outbox() -> ConnectionOutbox { ConnectionOutbox(maxQueuedBytes: 1 << 20, maxStall: .seconds(30), eventLoop: loop) }

    func member(
        _ outbox: ConnectionOutbox,
        token: Int64,
        coalesces: Bool,
        held: Bool = false,
        once: Bool = false,
        onFinished: @escaping @Sendable () -> Void = {}
    ) -> TokenFanout.Member {
        TokenFanout.Member(
            outbox: outbox,
            token: token,
            prefixes: [ByteBuffer(string: "t\(token):"), ByteBuffer(string: "n\(token):")],
            coalesces: coalesces,
            held: held,
            once: once,
            onFinished: onFinished
        )
    }

    func text(_ outbox: ConnectionOutbox) -> String { outbox.take().chunks.map { String(buffer: $0) }.joined() }

    @Test func oneEmissionForTokenAfterTokenIsOneDeliveryAndEachTokenGetsItsBytesAfterItsAnswer() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let outboxes = (1...3).map { _ in outbox() }
        for (index, outbox) in outboxes.enumerated() {
            share.submit(.add(id: index + 1, member(outbox, token: Int64(index + 1), coalesces: true), answer: .line(ByteBuffer(string: "answer\n"))))
        }
        // The engine calls each observer of one change in a row: one task on the loop for all of them.
        let body = ByteBuffer(string: "e7\n")
        for id in 1...3 { share.submit(.deliver(TokenFanout.Change(emission: 7), body, to: [id])) }
        share.submit(.deliver(TokenFanout.Change(emission: 8), ByteBuffer(string: "e8\n"), to: [2]))
        loop.run()
        #expect(text(outboxes[0]) == "answer\nt1:e7\n")
        #expect(text(outboxes[1]) == "answer\nt2:e7\nt2:e8\n")
        #expect(text(outboxes[2]) == "answer\nt3:e7\n")
    }

    @Test func aHeldTokensNotificationsFollowItsAnswerInOrder() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let outbox = outbox()
        share.submit(.add(id: 1, member(outbox, token: 1, coalesces: false, held: true)))
        share.submit(.deliver(TokenFanout.Change(emission: 1), ByteBuffer(string: "ready\n"), to: [1]))
        share.submit(.deliver(TokenFanout.Change(emission: 2), ByteBuffer(string: "next\n"), to: [1]))
        loop.run()
        #expect(text(outbox).isEmpty, "nothing is written before the token is let through")
        outbox.enqueue(ByteBuffer(string: "other\n"))  // an answer queued before the token's
        share.submit(.open(id: 1, answer: .line(ByteBuffer(string: "answer\n"))))
        share.submit(.deliver(TokenFanout.Change(emission: 3), ByteBuffer(string: "later\n"), to: [1]))
        loop.run()
        #expect(text(outbox) == "other\nanswer\nt1:ready\nt1:next\nt1:later\n")
    }

    @Test func aRefusedTokenThatLeftWhileHeldIsNeverWritten() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let outbox = outbox()
        share.submit(.add(id: 1, member(outbox, token: 1, coalesces: false, held: true)))
        share.submit(.deliver(TokenFanout.Change(emission: 1), ByteBuffer(string: "error\n"), to: [1]))
        share.submit(.remove(id: 1))
        share.submit(.open(id: 1, answer: .line(ByteBuffer(string: "answer\n"))))
        loop.run()
        #expect(text(outbox).isEmpty)
    }

    /// Behind, a window's change replaces the one waiting for its token by the window's full state; a stream's
    /// messages (news) all stay queued.
    @Test func behindAWindowResetsToItsFullStateAndNewsIsNeverReplaced() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let window = outbox()
        let news = outbox()
        share.submit(.add(id: 1, member(window, token: 1, coalesces: true)))
        share.submit(.add(id: 2, member(news, token: 2, coalesces: false)))
        loop.run()
        window.writerBlocked()
        news.writerBlocked()
        for version in 1...3 {
            let full: ConnectionOutbox.FullState = { ByteBuffer(string: "full\(version)\n") }
            share.submit(.deliver(TokenFanout.Change(emission: version, fullState: full), ByteBuffer(string: "change\(version)\n"), to: [1]))
            share.submit(.deliver(TokenFanout.Change(emission: 100 + version), ByteBuffer(string: "message\(version)\n"), to: [2]))
            loop.run()
        }
        #expect(text(window) == "t1:full3\n")
        #expect(window.coalescedCount == 2)
        #expect(text(news) == "t2:message1\nt2:message2\nt2:message3\n")
    }

    @Test func aOnceTokenLeavesAfterItsOneNotification() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let outbox = outbox()
        let finished = Atomic(0)
        share.submit(.add(id: 1, member(outbox, token: 1, coalesces: true, once: true) { finished.add(1, ordering: .relaxed) }))
        share.submit(.deliver(TokenFanout.Change(emission: 1), ByteBuffer(string: "first\n"), to: [1]))
        share.submit(.deliver(TokenFanout.Change(emission: 2), ByteBuffer(string: "second\n"), to: [1]))
        loop.run()
        #expect(text(outbox) == "t1:first\n")
        #expect(finished.load(ordering: .relaxed) == 1)
    }

    @Test func aStreamsNoticeUsesItsOwnPrefixAndIsNeverMergedWithAnother() {
        let share = FanoutShare<TokenFanout>(eventLoop: loop)
        let outboxes = [outbox(), outbox()]
        share.submit(.add(id: 1, member(outboxes[0], token: 1, coalesces: false)))
        share.submit(.add(id: 2, member(outboxes[1], token: 2, coalesces: false)))
        loop.run()
        share.submit(.deliver(TokenFanout.Change(emission: nil, method: 1), ByteBuffer(string: "resync\n"), to: [1]))
        share.submit(.deliver(TokenFanout.Change(emission: nil, method: 1), ByteBuffer(string: "refused\n"), to: [2]))
        loop.run()
        #expect(text(outboxes[0]) == "n1:resync\n")
        #expect(text(outboxes[1]) == "n2:refused\n")
    }
}
