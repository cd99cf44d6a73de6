// Licensed under the Apache License, Version 2.0.

import LiveGateConfig
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

/// `SO_PEERGROUPS` (Linux 4.13): the peer's supplementary groups. Not exported by Swift's Glibc module.
private let soPeerGroups: Int32 = 59

/// Who is at the other end of a Unix socket connection (`SO_PEERCRED`, `SO_PEERGROUPS`): as the kernel saw it
/// at connect time.
package struct PeerCredentials: Sendable, Equatable {
    let pid: Int32
    let uid: UInt32
    let gid: UInt32
    /// The supplementary groups (`nil` when the kernel would not say, or the peer has more than 256: it is
    /// then judged by its uid and primary group only).
    var groups: [UInt32]? = nil

    /// The peer of `channel`, or `nil` when it is not a Unix socket or the kernel would not say.
    static func of(_ channel: any Channel) async -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        do {
            let credentials: KernelUcred = try await provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET),
                name: SocketOptionName(SO_PEERCRED)
            ).get()
            let groups: InlineArray<256, UInt32>? = try? await provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET),
                name: SocketOptionName(soPeerGroups)
            ).get()
            return PeerCredentials(
                pid: credentials.pid,
                uid: credentials.uid,
                gid: credentials.gid,
                groups: groups.map(Self.groups(in:))
            )
        } catch {
            return nil
        }
    }

    /// The groups in a `SO_PEERGROUPS` answer. NIO zeroes the buffer and does not say how much the kernel
    /// wrote, but the kernel keeps a process's groups sorted (`setgroups(2)` sorts them for its binary
    /// search, and `SO_PEERGROUPS` copies them in that order): so the groups are the values up to the first
    /// zero after the first place, and a zero in the first place is group 0 when a group follows it. The one
    /// case this cannot tell, a peer whose only supplementary group is 0 (root), reads as no groups.
    package static func groups(in buffer: InlineArray<256, UInt32>) -> [UInt32] {
        var groups: [UInt32] = []
        for index in buffer.indices {
            let gid = buffer[index]
            if gid == 0 {
                if index == 0, buffer[1] != 0 {
                    groups.append(0)
                    continue
                }
                break
            }
            groups.append(gid)
        }
        return groups
    }
}

extension AccessPolicy {
    /// The decision for a peer (its supplementary groups included).
    func decide(_ peer: PeerCredentials) -> Decision {
        decide(uid: peer.uid, gid: peer.gid, groups: peer.groups ?? [])
    }

    /// Whether a peer may administer a daemon running as `daemonUID` (its supplementary groups included).
    func mayAdminister(_ peer: PeerCredentials, daemonUID: UInt32) -> Bool {
        mayAdminister(uid: peer.uid, gid: peer.gid, groups: peer.groups ?? [], daemonUID: daemonUID)
    }
}
