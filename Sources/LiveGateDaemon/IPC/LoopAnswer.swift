// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore

/// An answer that a task on the connection's event loop queues before what it does there (a token's join:
/// ``ObjectTopicShare``): a line made already, or a new token's answer, written on the loop itself.
///
/// A token's answer written by the thread that handles the request was allocated there and freed by the loop once
/// copied into the connection's queue: a burst of thousands of observations kept the loop waiting on that thread's
/// allocator lock, free after free, and cost the requests' thread (the head of the burst's pipeline) the encoding.
package enum LoopAnswer: Sendable {
    /// A complete line, `\n` included.
    case line(ByteBuffer)
    /// A new token's answer to a request with an integer id (``TokenAnswerFrame``; a request with any other id is
    /// answered as every answer is).
    case token(Int64, id: Int64)

    /// The line to queue.
    package func bytes() -> ByteBuffer {
        switch self {
        case .line(let line):
            return line
        case .token(let token, let id):
            var line = ByteBufferAllocator().buffer(capacity: 64)
            TokenAnswerFrame.write(token: token, id: id, to: &line)
            return line
        }
    }
}
