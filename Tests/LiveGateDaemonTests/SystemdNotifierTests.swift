// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateSystemd
import Testing

/// The notifier never waits for the service manager: a reader that stopped reading (its socket's queue
/// full) once held up the daemon's status loop, then its shutdown.
@Suite(.serialized) struct SystemdNotifierTests {
    @Test(.timeLimit(.minutes(1))) func aFullNotificationSocketMakesNotifyReturnFalseInsteadOfWaiting() throws {
        let path = NSTemporaryDirectory() + "livegate-notify-\(getpid()).sock"
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(path)
            unsetenv("NOTIFY_SOCKET")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        setenv("NOTIFY_SOCKET", path, 1)

        let notifier = SystemdNotifier()
        // Nobody reads: the queue fills (10 datagrams by default), and then each call returns at once.
        let results = (0..<200).map { notifier.notify("STATUS=\($0)") }
        let sent = results.prefix { $0 }.count
        #expect(sent > 0 && sent < 200, "some sent, then refused without waiting (sent \(sent))")
        #expect(results.dropFirst(sent).allSatisfy { !$0 }, "once full, it stays full while nobody reads")

        var buffer = [UInt8](repeating: 0, count: 256)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self) == "STATUS=0", "the first, intact")
        #expect(notifier.notify("READY=1"), "one read: room for one more")
    }

    @Test func withoutANotificationSocketThereIsNothingToSay() {
        unsetenv("NOTIFY_SOCKET")
        #expect(SystemdNotifier().notify("READY=1"))
    }
}
