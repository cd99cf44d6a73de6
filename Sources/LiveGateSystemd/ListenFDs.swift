// Licensed under the Apache License, Version 2.0.

import CSystemd

/// Sockets passed by the service manager (socket activation, `LISTEN_FDS`).
public enum ListenFDs {
    /// The first passed descriptor, when systemd (or `systemd-socket-activate`) passed at least one that is a
    /// listening Unix stream socket; `nil` otherwise. The `LISTEN_*` variables are unset so that children do
    /// not inherit them.
    public static func takeUnixStreamListener() -> Int32? {
        let count = sd_listen_fds(1)
        guard count >= 1 else { return nil }
        let fd = SD_LISTEN_FDS_START
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else { return nil }
        return fd
    }
}
