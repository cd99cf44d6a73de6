// Licensed under the Apache License, Version 2.0.

import CSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Tells the service manager about the daemon's state (`sd_notify`). Without `NOTIFY_SOCKET` (not run by
/// systemd) every call does nothing.
public protocol ReadinessNotifier: Sendable {
    /// Sends one notification, e.g. `READY=1\nSTATUS=serving`, without waiting. Returns `false` when it could
    /// not be sent now (the service manager's socket is full: it is not reading); the caller may try again.
    @discardableResult
    func notify(_ state: String) -> Bool
}

extension ReadinessNotifier {
    /// Sends a notification that must arrive (`READY=1`: without it the service manager would time the start
    /// out), trying again every 20 ms while the socket is full, for up to `patience`. Returns whether it was sent.
    @discardableResult
    public func notifyInsisting(_ state: String, patience: Duration = .seconds(10)) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + patience
        while !notify(state) {
            guard clock.now < end, (try? await Task.sleep(for: .milliseconds(20))) != nil else { return false }
        }
        return true
    }
}

/// The real notifier: `sd_notify(3)`'s datagram to `$NOTIFY_SOCKET`, sent without blocking.
///
/// libsystemd's `sd_notify` blocks while the socket's queue is full (on Linux, `net.unix.max_dgram_qlen`
/// datagrams, 10 by default, when the reader is slow or stuck), and it is called from the daemon's
/// cooperative threads: a service manager that stopped reading once wedged the status loop and then the
/// shutdown itself (`STOPPING=1`). Here a full socket only makes `notify` return `false`.
public struct SystemdNotifier: ReadinessNotifier {
    public init() {}

    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let pointer = getenv("NOTIFY_SOCKET") else { return true }
        let path = Array(String(cString: pointer).utf8)
        guard path.first == UInt8(ascii: "/") || path.first == UInt8(ascii: "@") else {
            return sd_notify(0, state) > 0  // another kind of address (vsock): libsystemd knows it
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            bytes.copyBytes(from: path)
            if path.first == UInt8(ascii: "@") { bytes[0] = 0 }  // an abstract socket
        }
        // An abstract address is exactly its bytes; a path ends with its NUL.
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (path.first == UInt8(ascii: "@") ? 0 : 1)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let sent = withUnsafePointer(to: &address) { addressPointer in
            addressPointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                Array(state.utf8).withUnsafeBytes { body in
                    sendto(fd, body.baseAddress, body.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), socketAddress, socklen_t(length))
                }
            }
        }
        return sent >= 0
    }
}
