// Licensed under the Apache License, Version 2.0.

import Foundation

/// Plain TCP sockets on 127.0.0.1 for the tests' fake clouds and proxies (blocking, one thread each).
enum LoopbackSockets {
    /// A socket listening on 127.0.0.1 at a port the kernel chose, and that port.
    static func listen(backlog: Int32, what: String) throws -> (socket: Int32, port: Int) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(listener, backlog) == 0 else {
            close(listener)
            throw ClusterError("\(what) could not listen")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        return (listener, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A socket connected to 127.0.0.1 at `port`, or `nil` when the connection failed.
    static func connect(port: Int) -> Int32? {
        let connection = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(connection, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(connection)
            return nil
        }
        return connection
    }

    private static func address(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
