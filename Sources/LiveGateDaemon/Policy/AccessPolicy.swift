// Licensed under the Apache License, Version 2.0.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Who may connect, and who may only read, decided from a peer's credentials (`SO_PEERCRED`).
///
/// With no `allow-*` setting, every peer that can open the socket may connect (the socket's mode and
/// group are then the gate). Groups are matched on the peer's primary group: the only one the kernel
/// reports for a socket peer, and the only one a sandboxed daemon can learn.
public struct AccessPolicy: Sendable, Equatable {
    public var allowedUsers: Set<UInt32> = []
    public var allowedGroups: Set<UInt32> = []
    public var readOnlyUsers: Set<UInt32> = []
    public var readOnlyGroups: Set<UInt32> = []

    public init() {}

    public enum Decision: Equatable, Sendable {
        case readWrite
        case readOnly
        case refused(String)
    }

    public func decide(uid: UInt32, gid: UInt32) -> Decision {
        if !(allowedUsers.isEmpty && allowedGroups.isEmpty) && !allowedUsers.contains(uid) && !allowedGroups.contains(gid) {
            return .refused("uid \(uid) (group \(gid)) is not in allow-users or allow-groups")
        }
        if readOnlyUsers.contains(uid) || readOnlyGroups.contains(gid) { return .readOnly }
        return .readWrite
    }

    /// Resolves a comma-separated list of user names or numeric ids.
    static func users(_ list: String) throws(ConfigError) -> Set<UInt32> {
        try resolve(list, kind: "user") { name in getpwnam(name).map { $0.pointee.pw_uid } }
    }

    /// Resolves a comma-separated list of group names or numeric ids.
    static func groups(_ list: String) throws(ConfigError) -> Set<UInt32> {
        try resolve(list, kind: "group") { name in getgrnam(name).map { $0.pointee.gr_gid } }
    }

    private static func resolve(_ list: String, kind: String, lookUp: (String) -> UInt32?) throws(ConfigError) -> Set<UInt32> {
        var ids: Set<UInt32> = []
        for item in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            if let id = UInt32(item) {
                ids.insert(id)
            } else if let id = lookUp(item) {
                ids.insert(id)
            } else {
                throw ConfigError("no \(kind) named \(item)")
            }
        }
        return ids
    }
}
