// Licensed under the Apache License, Version 2.0.

import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's `struct ucred` (pid, uid, gid: three 32-bit fields), which Swift's Glibc module does not
/// export because glibc declares it only under `_GNU_SOURCE`.
private struct KernelUcred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Who is at the other end of a Unix socket connection (`SO_PEERCRED`): as the kernel saw it at connect time.
struct PeerCredentials: Sendable, Equatable {
    let pid: Int32
    let uid: UInt32
    let gid: UInt32

    /// The peer of `channel`, or `nil` when it is not a Unix socket or the kernel would not say.
    static func of(_ channel: any Channel) async -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        do {
            let credentials: KernelUcred = try await provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET),
                name: SocketOptionName(SO_PEERCRED)
            ).get()
            return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
        } catch {
            return nil
        }
    }
}
