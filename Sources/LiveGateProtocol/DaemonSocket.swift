// Licensed under the Apache License, Version 2.0.

/// Where livegated's socket is when nobody says: one rule for the daemon, `livegatectl`, the Swift client and
/// the C library (`lg_connect(NULL, ...)`): `$LIVEGATE_SOCKET` when set (and not empty), else the system
/// daemon's `/run/livegate/livegate.sock`.
public enum DaemonSocket {
    /// The system daemon's socket (`livegated.socket` listens there).
    public static let systemPath = "/run/livegate/livegate.sock"

    /// The environment variable that names another socket, for the daemon and its clients alike.
    public static let environmentVariable = "LIVEGATE_SOCKET"

    /// The socket to use when none is given.
    public static func defaultPath(environment: [String: String]) -> String {
        if let path = environment[environmentVariable], !path.isEmpty { return path }
        return systemPath
    }
}
