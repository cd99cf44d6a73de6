// Licensed under the Apache License, Version 2.0.

import LiveSDK
import NIOCore
import Synchronization

/// Windows, feeds and streams on the fan-out's path (``FanoutShare``). The engine decides observer by observer what
/// each token hears (a window's change relative to what the token saw, a feed's event, a stream's message) and
/// gives every observer of one change the same emission, which is encoded once; a delivery names its tokens, and
/// the share merges those of one emission queued one after the other into one.
///
/// A window's change replaced while its client is behind becomes the window's full state (`reset: true`); a
/// feed's events and a stream's messages are news, never replaced: a client too slow for them is cut off by its
/// outbox.
package enum TokenFanout: FanoutKind {
    package struct Member: Sendable {
        let outbox: ConnectionOutbox
        let token: Int64
        /// The token's notification prefixes, by ``Change/method`` (a stream's messages and notices have one each).
        let prefixes: [ByteBuffer]
        /// Whether a notification waiting for a client that is behind is replaced by the next (windows), or
        /// never (feeds, streams).
        let coalesces: Bool
        /// What came for the token before it was let through (``FanoutShare/Operation/open(id:answer:)``), in
        /// order; `nil` once let through.
        var held: [(Change, ByteBuffer)]?
        /// A once-token: it leaves after its one notification, and `onFinished` is called.
        let once: Bool
        let onFinished: @Sendable () -> Void

        /// - Parameter held: whether nothing is written for the token until it is let through (a subscription
        ///   the cloud may refuse: its answer comes once it is made, and what came meanwhile follows it).
        package init(
            outbox: ConnectionOutbox,
            token: Int64,
            prefixes: [ByteBuffer],
            coalesces: Bool,
            held: Bool = false,
            once: Bool = false,
            onFinished: @escaping @Sendable () -> Void = {}
        ) {
            self.outbox = outbox
            self.token = token
            self.prefixes = prefixes
            self.coalesces = coalesces
            self.held = held ? [] : nil
            self.once = once
            self.onFinished = onFinished
        }

        /// Offers one notification: the body at `position` of `bodies`.
        mutating func offer(_ change: Change, _ bodies: SharedBodies, at position: Int) {
            guard held == nil else {
                held?.append((change, bodies.body(at: position)))
                return
            }
            outbox.offerOnLoop(
                token: coalesces ? token : nil,
                prefix: prefixes[change.method],
                bodies: bodies,
                at: position,
                fullState: change.fullState
            )
        }
    }

    /// What one emission is for every token it reaches.
    package struct Change: Sendable {
        /// The engine's emission (a feed event's, a window change's) or the stream message's sequence number: one
        /// body for every token that hears it. `nil`: a notice encoded for this token alone.
        let emission: Int?
        /// Which of the member's ``Member/prefixes``.
        let method: Int
        /// A window change's full state, for a client behind (see ``ConnectionOutbox/FullState``).
        let fullState: ConnectionOutbox.FullState?

        package init(emission: Int?, method: Int = 0, fullState: ConnectionOutbox.FullState? = nil) {
            self.emission = emission
            self.method = method
            self.fullState = fullState
        }
    }

    package static var replacesWhenBehind: Bool { false }

    package static func outbox(of member: Member) -> ConnectionOutbox { member.outbox }

    package static func finished(_ member: Member) -> (@Sendable () -> Void)? { member.onFinished }

    package static func isSame(_ change: Change, as previous: Change) -> Bool {
        change.emission != nil && change.emission == previous.emission && change.method == previous.method
    }

    /// The engine tells a token what it holds itself (its observer's first call): nothing to offer at a join.
    package static func join(_ member: inout Member, last: Change?) -> Bool { true }

    /// Lets a held token through: what came meanwhile, in order.
    package static func open(_ member: inout Member) {
        guard let held = member.held else { return }
        member.held = nil
        for (change, body) in held { member.offer(change, SharedBodies(holding: body), at: 0) }
    }

    package static func deliver<Changes: RandomAccessCollection<Change>, Targets: RandomAccessCollection<[Int]?>>(
        _ changes: Changes,
        _ bodies: SharedBodies,
        targets: Targets,
        to table: inout IDTable<Member>,
        finished: inout [@Sendable () -> Void]
    ) where Changes.Index == Int, Targets.Index == Int {
        var finishedIDs: [Int] = []
        for position in changes.indices {
            let change = changes[position]
            if let ids = targets[position] {
                for id in ids {
                    let once = table.update(id) { member in
                        member.offer(change, bodies, at: position)
                        return member.once
                    }
                    if once == true { finishedIDs.append(id) }
                }
            } else {
                table.updateEach { id, member in
                    member.offer(change, bodies, at: position)
                    if member.once { finishedIDs.append(id) }
                }
            }
            // A once-token leaves at its one notification, before the next change.
            for id in finishedIDs {
                if let member = table.remove(id) { finished.append(member.onFinished) }
            }
            finishedIDs.removeAll(keepingCapacity: true)
        }
    }
}

/// A token's place on a ``TokenFanout`` share.
struct TokenMembership: Sendable {
    let share: FanoutShare<TokenFanout>
    let id: Int

    /// Lets a held token through, `answer` (its connection's answer giving it the token) first.
    func open(answer: LoopAnswer?) { share.submit(.open(id: id, answer: answer)) }

    /// The token leaves; nothing more is written for it.
    func leave() { share.submit(.remove(id: id)) }
}

/// The ``TokenFanout`` shares of one kind of token (windows, feeds or streams), one per event loop with tokens.
final class TokenShares: Sendable {
    private let shares = Mutex<[FanoutShare<TokenFanout>]>([])
    private let nextID = Atomic<Int>(0)

    /// Adds a token of a connection on `eventLoop`, its answer (when given) queued first.
    func join(_ member: TokenFanout.Member, on eventLoop: any EventLoop, answer: LoopAnswer? = nil) -> TokenMembership {
        let share = shares.withLock { shares in
            if let existing = shares.first(where: { ObjectIdentifier($0.eventLoop) == ObjectIdentifier(eventLoop) }) { return existing }
            let share = FanoutShare<TokenFanout>(eventLoop: eventLoop)
            shares.append(share)
            return share
        }
        let id = nextID.add(1, ordering: .relaxed).newValue
        share.submit(.add(id: id, member, answer: answer))
        return TokenMembership(share: share, id: id)
    }
}
