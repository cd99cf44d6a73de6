// Licensed under the Apache License, Version 2.0.

import LiveProcess
import Testing

/// When a process (the daemon, the cloud) gives freed memory back: once per quiet spell that follows work, never while it works,
/// never while it was quiet all along.
@Suite struct IdleTrimPolicyTests {
    @Test func trimsOnceAfterTwoQuietSecondsThatFollowWork() {
        var policy = IdleTrimPolicy()
        let start = ContinuousClock.now
        // (CPU share, seconds after start, whether to trim then, why)
        let samples: [(Double, Int, Bool, String)] = [
            (0, 0, false, "quiet since start: nothing to give back"),
            (0, 5, false, "still quiet all along"),
            (0.9, 6, false, "busy"),
            (0.01, 7, false, "quiet for 0 s"),
            (0.01, 8, false, "quiet for 1 s"),
            (0.01, 9, true, "quiet for 2 s after work: trim"),
            (0, 10, false, "once per quiet spell"),
            (0, 30, false, "once per quiet spell"),
            (0.5, 31, false, "busy again"),
            (0, 32, false, "quiet for 0 s"),
            (0.3, 33, false, "a quiet second between bursts does not count"),
            (0, 34, false, "quiet for 0 s"),
            (0, 35, false, "quiet for 1 s"),
            (0, 36, true, "quiet for 2 s after work: trim"),
        ]
        for (share, seconds, expected, why) in samples {
            let trim = policy.sample(cpuShare: share, at: start + .seconds(seconds))
            #expect(trim == expected, "at \(seconds) s: \(why)")
        }
    }
}
