// Licensed under the Apache License, Version 2.0.

import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One keep-alive HTTP/1.1 connection on a blocking socket, used by one thread: the load generator of the
/// cloud's write rows. AsyncHTTPClient spent 92-131 µs of CPU a write on this machine's two cores, as much as
/// half the cloud's own, so the 64-writer row measured the benchmark as much as the cloud; a request here is a
/// `send` and a `recv` or two (like `wrk`). Only what the cloud's answers to writes need: a status line,
/// headers with `Content-Length`, a body (a chunked answer is an error, not guessed at).
final class RawHTTPConnection {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Bytes in `buffer` not yet consumed (kept for the next answer should a read bring more than one: it
    /// cannot, one request at a time, but nothing is dropped if it did).
    private var buffered = 0

    /// Connects to `base`'s host and port (`http://host:port`, an IPv4 address or `localhost`).
    init(base: String) throws {
        guard let url = URL(string: base), url.scheme == "http", let host = url.host, let port = url.port else {
            throw BenchError("not an http://host:port address: \(base)")
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
            throw BenchError("not an IPv4 address: \(host)")
        }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw BenchError("connect to \(base): errno \(code)")
        }
    }

    deinit { close(fd) }

    /// Sends `method path` with `body` (JSON) and a bearer `token`; returns the answer's status code once its
    /// whole body is read.
    func request(_ method: String, _ path: String, body: String, token: String) throws -> Int {
        var message = "\(method) \(path) HTTP/1.1\r\nHost: cloud\r\nAuthorization: Bearer \(token)\r\n"
        message += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        message += body
        try message.withUTF8 { try sendAll($0) }
        return try readAnswer()
    }

    private func sendAll(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { throw BenchError("send: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads until `buffered` holds at least `count` bytes.
    private func fill(atLeast count: Int) throws {
        if count > buffer.count { buffer += [UInt8](repeating: 0, count: count - buffer.count) }
        while buffered < count {
            let read = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + buffered, $0.count - buffered, 0) }
            if read < 0, errno == EINTR { continue }
            guard read > 0 else { throw BenchError(read == 0 ? "the cloud closed the connection" : "recv: errno \(errno)") }
            buffered += read
        }
    }

    /// The status code and the `Content-Length` of an answer's head (its bytes up to and with the blank line).
    static func statusAndLength(_ head: ArraySlice<UInt8>) throws -> (status: Int, length: Int?) {
        func text() -> String { String(decoding: head.prefix(200), as: UTF8.self) }
        // "HTTP/1.x NNN ..."
        let start = head.startIndex
        guard head.count >= 12, head[start..<start + 7].elementsEqual("HTTP/1.".utf8), head[start + 8] == 32 else {
            throw BenchError("not an HTTP answer: \(text())")
        }
        var status = 0
        for byte in head[start + 9..<start + 12] {
            guard (48...57).contains(byte) else { throw BenchError("not an HTTP answer: \(text())") }
            status = status * 10 + Int(byte - 48)
        }
        var length: Int?
        var line = start
        while let end = head[line...].firstIndex(of: 10) {
            let field = head[line..<end]
            line = end + 1
            guard let colon = field.firstIndex(of: 58) else { continue }
            let name = field[field.startIndex..<colon]
            if Self.named(name, "content-length") {
                var value = 0
                var digits = 0
                for byte in field[(colon + 1)...] where byte != 32 && byte != 9 && byte != 13 {
                    guard (48...57).contains(byte) else { throw BenchError("a Content-Length that is not a number: \(text())") }
                    value = value * 10 + Int(byte - 48)
                    digits += 1
                }
                guard digits > 0 else { throw BenchError("an empty Content-Length: \(text())") }
                length = value
            } else if Self.named(name, "transfer-encoding") {
                throw BenchError("an answer with Transfer-Encoding: not read by this client")
            }
        }
        return (status, length)
    }

    /// Whether a header's name is `lowercase` (ASCII, any case).
    private static func named(_ name: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
        guard name.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            zip(name, expected).allSatisfy { byte, wanted in (byte >= 65 && byte <= 90 ? byte + 32 : byte) == wanted }
        }
    }

    private func readAnswer() throws -> Int {
        // The head: up to the blank line.
        var headEnd: Int?
        var searched = 0
        while true {
            headEnd = buffer.withUnsafeBufferPointer { bytes in
                var i = max(0, searched - 3)
                while i + 3 < buffered {
                    if bytes[i] == 13, bytes[i + 1] == 10, bytes[i + 2] == 13, bytes[i + 3] == 10 { return i + 4 }
                    i += 1
                }
                return nil
            }
            if headEnd != nil { break }
            searched = buffered
            try fill(atLeast: buffered + 1)
        }
        // Read as bytes, not strings: splitting and trimming the head as text was a third of this client's CPU.
        let (status, length) = try Self.statusAndLength(buffer[0..<headEnd!])
        guard let length else {
            throw BenchError("an answer without Content-Length: \(String(decoding: buffer[0..<headEnd!], as: UTF8.self).prefix(200))")
        }
        try fill(atLeast: headEnd! + length)
        let consumed = headEnd! + length
        if buffered > consumed {
            buffer.withUnsafeMutableBufferPointer { bytes in
                _ = memmove(bytes.baseAddress!, bytes.baseAddress! + consumed, buffered - consumed)
            }
        }
        buffered -= consumed
        return status
    }
}

/// Runs `body(index)` on `count` threads of their own at once (each may block on its socket) and waits for
/// them all; throws the first error one threw.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) async throws {
    guard count > 0 else { return }
    let failure = Mutex<(any Error)?>(nil)
    let left = Mutex(count)
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        for index in 0..<count {
            let thread = Thread {
                do {
                    try body(index)
                } catch {
                    failure.withLock { if $0 == nil { $0 = error } }
                }
                let last = left.withLock { left -> Bool in
                    left -= 1
                    return left == 0
                }
                guard last else { return }
                if let error = failure.withLock({ $0 }) { continuation.resume(throwing: error) } else { continuation.resume() }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }
}

/// Writers, each a thread with a connection of its own, the connections made up front (outside what a row
/// times).
final class WriterThreads: Sendable {
    private let connections: Mutex<[RawHTTPConnection?]>
    let count: Int

    convenience init(_ count: Int, base: String) throws {
        try self.init(count, bases: [base])
    }

    /// Writer `i` connects to `bases[i % bases.count]` (writers spread over instances sharing a database).
    init(_ count: Int, bases: [String]) throws {
        self.count = count
        connections = Mutex(try (0..<count).map { index in try RawHTTPConnection(base: bases[index % bases.count]) })
    }

    /// Runs `body(index, connection)` for every writer at once and waits for them all (once: each connection
    /// goes to its thread).
    func run(_ body: @escaping @Sendable (Int, RawHTTPConnection) throws -> Void) async throws {
        try await onThreads(count) { index in
            guard let connection = self.connections.withLock({ $0[index].take() }) else { return }
            try body(index, connection)
        }
    }
}
