// Licensed under the Apache License, Version 2.0.

import NIOCore

/// The answer giving a new token, written directly rather than through ``WireJSON``: the same bytes as
/// ``WireJSON/line(_:)`` of an ``RPCResponse`` of a ``TokenResult`` for a request with an integer id,
///
///     {"id":<id>,"jsonrpc":"2.0","result":{"token":<token>}}\n
///
/// (a burst of observations answers thousands, each on the connection's event loop; a request with any other id
/// is answered through ``WireJSON``).
public enum TokenAnswerFrame {
    /// Writes the answer at the end of `buffer`.
    public static func write(token: Int64, id: Int64, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("{\"id\":")
        buffer.writeString(String(id))
        buffer.writeStaticString(",\"jsonrpc\":\"2.0\",\"result\":{\"token\":")
        buffer.writeString(String(token))
        buffer.writeStaticString("}}\n")
    }
}
