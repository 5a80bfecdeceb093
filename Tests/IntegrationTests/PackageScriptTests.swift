// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Issue 36, point 14: the package's prerm removed the live rules of whatever network namespace it ran in, on every
/// remove: `chroot R apt-get remove -y netpermd` in an image build sharing the host's namespace left the host with no
/// rules. It now removes them only on the system it runs on, as debhelper's own snippets decide that: no DPKG_ROOT,
/// systemd running (/run/systemd/system), and no policy-rc.d forbidding it (101). The real script runs in a mount
/// namespace of its own (a tmpfs /run and /usr/sbin, with the policy-rc.d the case wants), with a `netpermd` on PATH that
/// records being called; nothing of the host is touched.
final class PackageScriptTests: IntegrationTestCase {
    /// Whether the prerm ran `netpermd --remove-rules` for `remove` under these conditions.
    private func removesRules(systemd: Bool, dpkgRoot: String? = nil, policyRC: Int32? = nil) throws -> Bool {
        let dir = try makeTempDir()
        let calls = dir + "/calls"
        try "#!/bin/sh\necho \"$*\" >> \(calls)\n".write(toFile: dir + "/netpermd", atomically: true, encoding: .utf8)
        chmod(dir + "/netpermd", 0o755)
        // /usr/sbin of its own always: a container image's policy-rc.d (Docker's says 101) must not decide for the test.
        var setup = "mount -t tmpfs npt-run /run && mount -t tmpfs npt-sbin /usr/sbin"
        if systemd { setup += " && mkdir -p /run/systemd/system" }
        if let policyRC {
            setup += " && printf '#!/bin/sh\\nexit \(policyRC)\\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d"
        }
        let script = Repository.path("debian/netpermd.prerm")
        var env = ["PATH=\(dir):/usr/bin:/bin"]
        if let dpkgRoot { env.append("DPKG_ROOT=\(dpkgRoot)") }
        let r = try Subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                    setup + " && exec env -i " + env.joined(separator: " ") + " sh \"$0\" remove", script])
        XCTAssertEqual(r.status, 0, r.summary)
        let called = (try? String(contentsOfFile: calls, encoding: .utf8)) ?? ""
        XCTAssertTrue(called.isEmpty || called == "--remove-rules\n", called)
        return !called.isEmpty
    }

    func testThePrermRemovesRulesOnlyOnTheSystemItRunsOn() throws {
        XCTAssertTrue(try removesRules(systemd: true), "a remove on a running system removes its rules")
        XCTAssertTrue(try removesRules(systemd: true, policyRC: 0), "policy-rc.d allowing it")
        XCTAssertFalse(try removesRules(systemd: false), "a chroot: no systemd there, the namespace is the host's")
        XCTAssertFalse(try removesRules(systemd: true, dpkgRoot: "/srv/image"), "DPKG_ROOT: another root")
        XCTAssertFalse(try removesRules(systemd: true, policyRC: 101), "policy-rc.d forbids it")
    }
}
