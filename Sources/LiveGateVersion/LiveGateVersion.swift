// Licensed under the Apache License, Version 2.0.

/// livegate's version, in one place: every executable's `--version`, the daemon's `hello` answer, and
/// (read by `scripts/install`) the C library's `livegate.pc`. `LIVEGATE_VERSION` in `livegate.h` must equal
/// it (`scripts/check-install` checks).
public enum LiveGateVersion {
    public static let current = "0.1.0"
}
