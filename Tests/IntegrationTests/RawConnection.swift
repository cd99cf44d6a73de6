// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import NIOCore
import NIOPosix
import Synchronization

/// A protocol-level connection to the daemon: raw lines out, raw lines in. For tests that check bytes.
struct RawConnection: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    let lines: Queue<String>
    /// Lines received so far, counted as they arrive (before ``next(timeout:)`` takes them).
    let received: LineCount

    func send(_ line: String) async throws {
        try await outbound.write(ByteBuffer(string: line + "\n"))
    }

    func sendBytes(_ bytes: ByteBuffer) async throws {
        try await outbound.write(bytes)
    }

    /// The next line from the daemon, within `timeout`.
    func next(timeout: Duration = .seconds(20)) async throws -> String {
        let lines = lines
        guard let line = try await withTimeout(timeout, "no line from livegated", { try await lines.next() }) else {
            throw ClusterError("livegated closed the connection")
        }
        return line
    }

    static func with<R: Sendable>(_ path: String, _ body: (RawConnection) async throws -> R) async throws -> R {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(JSONLineFrameDecoder(maxFrameBytes: 64 << 20)))
                    return try NIOAsyncChannel(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(inboundType: InboundFrame.self, outboundType: ByteBuffer.self)
                    )
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            let (stream, sink) = AsyncThrowingStream.makeStream(of: String.self)
            let received = LineCount()
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        for try await frame in inbound {
                            if case .message(let line) = frame {
                                received.add()
                                sink.yield(String(buffer: line))
                            }
                        }
                        sink.finish()
                    } catch {
                        sink.finish(throwing: error)
                    }
                }
                defer { channel.channel.close(promise: nil) }
                return try await body(RawConnection(outbound: outbound, lines: Queue(stream), received: received))
            }
        }
    }
}

/// A count shared between a connection's reader and the test.
final class LineCount: Sendable {
    private let count = Atomic(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// Pulls from an async stream one element at a time, from any task (so a timeout can wrap each pull).
actor Queue<Element: Sendable> {
    private var iterator: AsyncThrowingStream<Element, any Error>.Iterator

    init(_ stream: AsyncThrowingStream<Element, any Error>) {
        iterator = stream.makeAsyncIterator()
    }

    func next() async throws -> Element? {
        var it = iterator
        defer { iterator = it }
        return try await it.next(isolation: self)
    }
}

/// Pulls elements until one satisfies `predicate` (for at most 30 s); returns all of them, that one last.
func elements<Element: Sendable>(
    _ queue: Queue<Element>,
    until what: String,
    _ predicate: @escaping @Sendable (Element) -> Bool
) async throws -> [Element] {
    try await withTimeout(.seconds(30), "waiting for \(what)") {
        var seen: [Element] = []
        while let element = try await queue.next() {
            seen.append(element)
            if predicate(element) { return seen }
        }
        throw ClusterError("the stream ended while waiting for \(what)")
    }
}
