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
    /// `{"id":…,"jsonrpc":"2.0","result":{"token":…}}` and `\n`: the same bytes as ``RPCResponse`` of a
    /// ``TokenResult`` through ``WireJSON``.
    case token(Int64, id: RequestID)

    /// The line to queue.
    package func bytes() -> ByteBuffer {
        switch self {
        case .line(let line):
            return line
        case .token(let token, .number(let id)):
            var line = ByteBufferAllocator().buffer(capacity: 64)
            line.writeStaticString("{\"id\":")
            line.writeString(String(id))
            line.writeStaticString(",\"jsonrpc\":\"2.0\",\"result\":{\"token\":")
            line.writeString(String(token))
            line.writeStaticString("}}\n")
            return line
        case .token(let token, let id):
            // A string, fractional or null id: rare, written by the protocol's encoder.
            let bytes =
                (try? WireJSON.bytes(RPCResponse(id: id, result: TokenResult(token: token))))
                ?? (try? WireJSON.bytes(
                    RPCErrorResponse(id: id, error: RPCError(code: .internalError, message: "the daemon could not encode its answer; see its log"))
                )) ?? []
            var line = ByteBufferAllocator().buffer(capacity: bytes.count + 1)
            line.writeBytes(bytes)
            line.writeStaticString("\n")
            return line
        }
    }
}
