// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import Synchronization

/// Writes a connection's outbox to its socket from the channel's event loop, with no task or continuation per
/// write: woken by the outbox when something is queued, it writes at once when the fan-out asks it to, on the
/// loop (``ConnectionOutbox/Wakeup/writeNow``: the fan-out's task already gathered everything waiting for the
/// connection) if it has not done so since its loop's last flush, and otherwise joins its loop's next flush
/// (``LoopFlusher``: one task for all the loop's connections with bytes). Either way it takes everything queued
/// (a few chunks of bytes) and writes it with one flush, so a burst of notifications costs a system call or
/// two per connection, not one per notification (nor one per topic that has news for it).
/// While the client's socket is full (the channel is not writable) it writes nothing and waits for NIO to
/// report writability; the outbox meanwhile coalesces, and cuts the client off if that lasts too long.
///
/// Sits in the pipeline after the frame decoder (it passes frames on untouched) so that it sees writability
/// changes. Its state is guarded by a lock because ``start(_:channel:)`` comes from the connection's task.
package final class OutboxWriter: ChannelInboundHandler, Sendable {
    package typealias InboundIn = InboundFrame

    private struct State {
        var outbox: ConnectionOutbox?
        var done: EventLoopPromise<Void>?
    }

    private let state = Mutex(State())
    /// The flusher of the channel's loop.
    private let flusher: LoopFlusher
    /// This handler's place in the pipeline: writes start here, next to the head, rather than at the tail
    /// (through the async channel's handlers, each a hop that retains and releases the buffer — with one
    /// body shared by every connection, those atomic reference counts were half the daemon's time at 1,000
    /// subscribers).
    private let context = Mutex<NIOLoopBound<ChannelHandlerContext>?>(nil)

    package init(flusher: LoopFlusher) {
        self.flusher = flusher
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context.withLock { $0 = NIOLoopBound(context, eventLoop: context.eventLoop) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context.withLock { $0 = nil }
    }

    /// Starts writing `outbox` to `channel`. The future completes once the outbox was closed and everything
    /// in it written (the channel is then closed), or the channel closed first.
    package func start(_ outbox: ConnectionOutbox, channel: any Channel) -> EventLoopFuture<Void> {
        let done = channel.eventLoop.makePromise(of: Void.self)
        state.withLock { $0 = State(outbox: outbox, done: done) }
        channel.closeFuture.whenComplete { _ in self.finish() }
        let drain = LoopFlusher.Drain { self.drain(channel) }
        outbox.setWakeup { [flusher] wakeup in
            if wakeup == .writeNow, channel.eventLoop.inEventLoop { flusher.writeNow(drain) } else { flusher.schedule(drain) }
        }
        return done.futureResult
    }

    /// Takes what is queued and writes it; on the channel's event loop.
    private func drain(_ channel: any Channel) {
        guard let outbox = state.withLock({ $0.outbox }) else { return }
        guard channel.isActive else {
            finish()
            return
        }
        guard channel.isWritable else {
            outbox.writerBlocked()
            return
        }
        outbox.writerUnblocked()
        let (chunks, finished) = outbox.take()
        let context = context.withLock({ $0 })?.value
        for chunk in chunks {
            if let context { context.write(NIOAny(chunk), promise: nil) } else { channel.write(chunk, promise: nil) }
        }
        if finished {
            let flushed = channel.eventLoop.makePromise(of: Void.self)
            channel.writeAndFlush(ByteBuffer(), promise: flushed)
            flushed.futureResult.whenComplete { _ in
                channel.close(promise: nil)
                self.finish()
            }
        } else if !chunks.isEmpty {
            if let context { context.flush() } else { channel.flush() }
            // Past the high watermark now: the client is behind from here on, not only once the next drain
            // finds it so (until then, a batch more would be copied for a socket that takes nothing).
            if !channel.isWritable { outbox.writerBlocked() }
            // Written (or held by the channel until the socket takes them: then the next user copies).
            flusher.chunks.recycle(chunks)
        }
    }

    private func finish() {
        let done = state.withLock { state -> EventLoopPromise<Void>? in
            defer { state = State() }
            return state.done
        }
        done?.succeed()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            // Not here and now: this event fires from inside a flush, and draining (which flushes) from it
            // would recurse for as long as the client keeps reading.
            let channel = context.channel
            context.eventLoop.execute { self.drain(channel) }
        }
        context.fireChannelWritabilityChanged()
    }
}
