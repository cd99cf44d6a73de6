// Licensed under the Apache License, Version 2.0.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Who may connect, who may only read, and who may administer (change the log level at run time), decided
/// from a peer's credentials: its uid, its primary gid (`SO_PEERCRED`) and its supplementary groups
/// (`SO_PEERGROUPS`), so that a user added to a group with `usermod -aG` matches it.
///
/// With no `allow-*` setting, every peer that can open the socket may connect (the socket's mode and
/// group are then the gate). Root and the daemon's own user may always administer; others only when listed
/// in `admin-users` or `admin-groups`.
public struct AccessPolicy: Sendable, Equatable {
    public var allowedUsers: Set<UInt32> = []
    public var allowedGroups: Set<UInt32> = []
    public var readOnlyUsers: Set<UInt32> = []
    public var readOnlyGroups: Set<UInt32> = []
    public var adminUsers: Set<UInt32> = []
    public var adminGroups: Set<UInt32> = []

    public init() {}

    public enum Decision: Equatable, Sendable {
        case readWrite
        case readOnly
        case refused(String)
    }

    public func decide(uid: UInt32, gid: UInt32, groups: [UInt32] = []) -> Decision {
        let all = Set(groups).union([gid])
        if !(allowedUsers.isEmpty && allowedGroups.isEmpty) && !allowedUsers.contains(uid) && allowedGroups.isDisjoint(with: all) {
            let listed = all.sorted().map(String.init).joined(separator: ", ")
            return .refused("uid \(uid) (groups \(listed)) is in neither allow-users nor allow-groups")
        }
        if readOnlyUsers.contains(uid) || !readOnlyGroups.isDisjoint(with: all) { return .readOnly }
        return .readWrite
    }

    /// Whether the peer may administer the daemon: root, the daemon's own user (`daemonUID`), or listed in
    /// `admin-users` / `admin-groups`.
    public func mayAdminister(uid: UInt32, gid: UInt32, groups: [UInt32] = [], daemonUID: UInt32) -> Bool {
        uid == 0 || uid == daemonUID || adminUsers.contains(uid) || !adminGroups.isDisjoint(with: Set(groups).union([gid]))
    }

    /// Resolves a comma-separated list of user names or numeric ids.
    public static func users(_ list: String) throws(ConfigError) -> Set<UInt32> {
        try resolve(list, kind: "user") { name in getpwnam(name).map { $0.pointee.pw_uid } }
    }

    /// Resolves a comma-separated list of group names or numeric ids.
    public static func groups(_ list: String) throws(ConfigError) -> Set<UInt32> {
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
