// Licensed under the Apache License, Version 2.0.

import Foundation
import Testing

/// The Debian packages (`scripts/package-deb`) as an administrator uses them, under the real service manager
/// (`scripts/systemd-sandbox`, booted with nothing of livegate installed): `apt-get install ./*.deb` of the
/// previous build, the configuration completed and the service used by a member of group `livegate`, an
/// upgrade to this build with the service still answering, `remove` (configuration and state kept), `purge`
/// (state, configuration, units' state and the system user gone).
///
/// The packages: `LIVEGATE_DEB_DIR` (`.ci/run` builds the release packages there), else the build the tests run
/// from packaged for the test (`scripts/package-deb [--debug] --no-build`). "The previous build" is the same
/// packages with an older Debian revision: what an upgrade runs (maintainer scripts, conffile, restart) is the
/// same.
///
/// Once per suite run: skipped in the PostgreSQL pass of `scripts/test` (the packaged cloud runs on its SQLite
/// default whatever the suite's cloud).
@Suite(
    .serialized,
    .enabled(if: SystemdSandbox.unavailableReason == nil, "cannot boot systemd here: \(SystemdSandbox.unavailableReason ?? "")"),
    .enabled(if: ProcessInfo.processInfo.environment["LIVEGATE_TEST_CLOUD"] != "postgres", "runs in the SQLite pass only")
)
struct PackageTests {
    static let packages = ["livegated", "livegatectl", "liblivegate0", "liblivegate-dev", "livegate-cloud", "livegate-swift-runtime"]

    /// This build's packages (in `directory/debs`) and a previous revision of them (in `directory/previous`).
    static func packagesFor(sandbox directory: String) throws {
        let debs = directory + "/debs"
        if let given = ProcessInfo.processInfo.environment["LIVEGATE_DEB_DIR"] {
            try FileManager.default.createDirectory(atPath: debs, withIntermediateDirectories: true)
            for file in try FileManager.default.contentsOfDirectory(atPath: given) where file.hasSuffix(".deb") && !file.contains("-dbgsym_") {
                try FileManager.default.copyItem(atPath: given + "/" + file, toPath: debs + "/" + file)
            }
        } else {
            let built = try runToCompletion(
                SystemdSandbox.repository + "/scripts/package-deb",
                SystemdSandbox.buildFlags + ["--no-build", "--output", debs]
            )
            guard built.status == 0 else { throw ClusterError("scripts/package-deb failed: \(built.output)") }
            for file in try FileManager.default.contentsOfDirectory(atPath: debs) where file.contains("-dbgsym_") {
                try FileManager.default.removeItem(atPath: debs + "/" + file)
            }
        }
        // The previous build: the same packages, one Debian revision older.
        let script = """
            set -e
            mkdir -p "$1/previous" "$1/unpacked"
            for deb in "$1"/debs/*.deb; do
                name="$(dpkg-deb -f "$deb" Package)"
                dpkg-deb -R "$deb" "$1/unpacked/$name"
                version="$(dpkg-deb -f "$deb" Version)"
                # Its version, and the exact versions it depends on (the -dev package's library), one older.
                sed -i "s/$version/${version%-*}-0~previous/g" "$1/unpacked/$name/DEBIAN/control"
                dpkg-deb --root-owner-group -Zgzip --build "$1/unpacked/$name" "$1/previous/${name}_previous.deb" > /dev/null
            done
            rm -rf "$1/unpacked"
            """
        let previous = try runToCompletion("/bin/bash", ["-c", script, "repack", directory])
        guard previous.status == 0 else { throw ClusterError("making the previous revision failed: \(previous.output)") }
    }

    func inside(_ sandbox: SystemdSandbox, _ command: String, as user: String? = nil) throws -> String {
        let result = try sandbox.shell(command, as: user, environment: ["DEBIAN_FRONTEND": "noninteractive"])
        guard result.status == 0 else { throw ClusterError("`\(command)` failed (\(result.status)): \(result.output)") }
        return result.output
    }

    @Test(.timeLimit(.minutes(10))) func installUpgradeRemoveAndPurgeUnderTheRealServiceManager() async throws {
        let sandbox = try SystemdSandbox.boot(staging: false)
        defer { sandbox.halt() }
        try Self.packagesFor(sandbox: sandbox.directory)
        let apt = "apt-get install -y -q --no-install-recommends"

        // README's "Install on Debian/Ubuntu" steps, word for word, with the previous build as ./dist: the
        // package says it did not start the daemon (no password yet), made its user, enabled the socket
        // (which starts the daemon at the first client, after the cloud below is up).
        let editor =
            "#!/bin/bash\nsed -i -e 's|^cloud-url = .*|cloud-url = http://127.0.0.1:8080|' -e 's|^username = .*|username = host-42|' \"$1\"\n"
        try editor.write(toFile: sandbox.directory + "/editor", atomically: true, encoding: .utf8)
        chmod(sandbox.directory + "/editor", 0o755)
        _ = try inside(sandbox, "ln -sfn /mnt/sandbox/previous /root/dist && useradd --create-home alice")
        for step in try InstalledServiceTests.operationsSteps(under: "### Install on Debian/Ubuntu", firstLine: "scripts/package-deb") {
            let result = try sandbox.shell(
                "cd /root && " + step,
                input: "secret\n",
                environment: ["EDITOR": "/mnt/sandbox/editor", "DEBIAN_FRONTEND": "noninteractive"]
            )
            #expect(result.status == 0, "README step `\(step)` failed: \(result.output)")
            if step.hasPrefix("apt install") { #expect(result.output.contains("livegated: not started"), "\(result.output)") }
        }
        _ = try inside(
            sandbox,
            "\(apt) \(["liblivegate0", "liblivegate-dev"].map { "/mnt/sandbox/previous/\($0)_previous.deb" }.joined(separator: " ")) 2>&1"
        )
        // The cloud (its package, a users file, an option), as an administrator sets one up; the runtime is
        // the one the daemon's install brought.
        let cloud = try inside(
            sandbox,
            "\(apt) /mnt/sandbox/previous/livegate-cloud_previous.deb 2>&1"
        )
        #expect(cloud.contains("livegate-cloud: not started"), "\(cloud)")
        #expect(try sandbox.shell("systemctl is-enabled livegate-cloud.service").output == "enabled\n")
        // The programs load the packaged Swift runtime, not the toolchain this machine built them with.
        let loaded = try inside(sandbox, "ldd /usr/bin/livegate-cloud")
        #expect(loaded.contains("libswiftCore.so => /usr/lib/livegate/libswiftCore.so"), "\(loaded)")
        #expect(loaded.contains("libFoundation.so => /usr/lib/livegate/libFoundation.so"), "\(loaded)")
        #expect(!loaded.contains("/opt/") && !loaded.contains("not found"), "\(loaded)")
        _ = try inside(sandbox, "install -m600 /dev/null /etc/livegate-cloud/users && echo 'host-42:secret' > /etc/livegate-cloud/users")
        _ = try inside(sandbox, "echo 'LIVEGATE_CLOUD_OPTIONS=\"--bcrypt-cost 4\"' > /etc/default/livegate-cloud && systemctl start livegate-cloud")
        try await eventually("the cloud answers", timeout: .seconds(30)) {
            try sandbox.shell("curl -sf -o /dev/null http://127.0.0.1:8080/v1/stats").status == 0
        }

        #expect(try inside(sandbox, "getent passwd livegate | cut -d: -f1,7") == "livegate:/usr/sbin/nologin\n")
        #expect(try sandbox.shell("systemctl is-enabled livegated.socket").output == "enabled\n")
        #expect(try sandbox.shell("systemctl is-active livegated.socket").output == "active\n")
        for program in ["livegated", "livegatectl"] {
            let loaded = try inside(sandbox, "ldd /usr/bin/\(program)")
            #expect(loaded.contains("/usr/lib/livegate/libswiftCore.so") && !loaded.contains("/opt/"), "\(loaded)")
        }
        #expect(try inside(sandbox, "man -P cat 5 livegated.conf | grep -c max-stall-seconds") != "0\n")
        #expect(try inside(sandbox, "pkg-config --modversion livegate").isEmpty == false)
        let put = try sandbox.shell(#"livegatectl put notes n1 '{"text":"before the upgrade"}'"#, as: "alice")
        #expect(put.status == 0, "\(put.output)")
        // journalctl -x explains the daemon's messages: the package's catalog, compiled by its postinst.
        let explained = try inside(sandbox, "journalctl -x --no-pager -u livegated MESSAGE_ID=904602c2193a493aafb369636eb1ccdf")
        #expect(explained.contains("livegated is starting") && explained.contains("Documentation: man:livegated(8)"), "\(explained)")

        // Upgrade to this build: the edited conffile kept without a question, the service restarted and
        // answering, the data still there.
        let upgraded = try inside(sandbox, "\(apt) \(Self.packages.map { "/mnt/sandbox/debs/\($0)_*.deb" }.joined(separator: " ")) 2>&1")
        #expect(!upgraded.contains("livegated: not started"), "\(upgraded)")
        #expect(try inside(sandbox, "grep '^username' /etc/livegate/livegated.conf") == "username = host-42\n")
        #expect(try inside(sandbox, "dpkg-query -W -f '${Version}' livegated").hasSuffix("-0~previous") == false)
        let get = try sandbox.shell("livegatectl get notes n1", as: "alice")
        #expect(get.status == 0 && get.output.contains("before the upgrade"), "\(get.output)")
        #expect(try sandbox.shell("systemctl is-active livegated.service").output == "active\n")

        // Remove: stopped, the configuration and the state kept.
        _ = try inside(sandbox, "apt-get remove -y -q livegated livegatectl 2>&1")
        #expect(try sandbox.shell("systemctl is-active livegated.socket livegated.service").output == "inactive\ninactive\n")
        #expect(try sandbox.shell("test -f /etc/livegate/livegated.conf && test -d /var/lib/livegate").status == 0)

        // Purge: nothing of it is left: state, the socket's directory, configuration, password, units' state, user and group.
        _ = try inside(sandbox, "apt-get purge -y -q \(Self.packages.joined(separator: " ")) 2>&1")
        let left = try sandbox.shell(
            "ls -d /etc/livegate /var/lib/livegate /run/livegate /etc/livegate-cloud /var/lib/private/livegate-cloud "
                + "/etc/systemd/system/sockets.target.wants/livegated.socket /var/lib/systemd/deb-systemd-helper-enabled/livegated.socket.dsh-also 2>/dev/null; "
                + "getent passwd livegate; getent group livegate; true"
        )
        #expect(left.output.isEmpty, "left after purge: \(left.output)")
        #expect(try sandbox.shell("dpkg-query -W -f '${Status}' livegated 2>&1").output.contains("install ok") == false)
    }
}
