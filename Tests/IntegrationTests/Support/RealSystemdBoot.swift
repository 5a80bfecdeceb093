import Foundation
import XCTest

extension IntegrationTestCase {
    /// A container with netpermd installed by `make install-files`, `policy` as /etc/netpermd/netpermd.conf,
    /// links wlan0/wlan0p and wwan0/wwan0p (wwan0 with a default route, wlan0 without), and netpermd.socket
    /// enabled and started the way docs/SYSTEMD.md says. The service itself has not started.
    func bootRealSystemd(policy: String) throws -> RealSystemd {
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wwan0", 100)])
        let staged = try stageInstall()
        try policy.write(toFile: staged + "/etc/netpermd/netpermd.conf", atomically: true, encoding: .utf8)

        let sd = try RealSystemd(namespace: ns, staged: staged, scratch: try makeTempDir())
        addTeardownBlock { sd.shutdown() }
        // Failures carry the container's journal, so what the daemon and systemd said is in the test log.
        showOnFailure("journal of \(sd.name)") {
            (try? sd.run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "60"]))?.stdout ?? "(no journal)"
        }
        try sd.check(["systemctl", "enable", "--now", "netpermd.socket"])
        return sd
    }

    /// Starts netpermd.service with the shipped enforcement drop-in (docs/ENFORCEMENT.md) and waits until STATUS
    /// says its rules are in force.
    func startEnforcing(_ sd: RealSystemd) throws {
        let dropIn = try String(contentsOfFile: Repository.root + "/systemd/netpermd-enforcement.conf", encoding: .utf8)
        try sd.write(dropIn, to: "/etc/systemd/system/netpermd.service.d/enforcement.conf")
        try sd.check(["systemctl", "daemon-reload"])
        try sd.check(["systemctl", "start", "netpermd.service"])
        try waitUntil("STATUS says enforcing", timeout: 10, interval: 0.05) {
            let status = try JSONValue.object(sd.check(["/usr/local/bin/netpermctl", "--json", "status"]).lines.last ?? "")
            let e = status["enforcement"] as? [String: Any]
            return (e?["state"] as? String == "enforcing", "\(e ?? [:])")
        }
    }
}
