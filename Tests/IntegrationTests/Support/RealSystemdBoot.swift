// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

extension IntegrationTestCase {
    /// A container with netpermd installed by `make install-files`, `policy` as /etc/netpermd/netpermd.conf,
    /// links wlan0/wlan0p and wwan0/wwan0p (by default wwan0 with a default route, wlan0 without), and
    /// netpermd.socket enabled and started the way docs/SYSTEMD.md says. The service itself has not started.
    func bootRealSystemd(policy: String, defaultRoutes: [(link: String, metric: Int)] = [("wwan0", 100)]) throws
        -> RealSystemd {
        let ns = try makeTwoLinkNamespace(defaultRoutes: defaultRoutes)
        let staged = try stageInstall()
        try policy.write(toFile: staged + "/etc/netpermd/netpermd.conf", atomically: true, encoding: .utf8)

        let sd = try RealSystemd(namespace: ns, staged: staged, scratch: try makeTempDir())
        addTeardownBlock { sd.shutdown() }
        // Failures carry the container's journal, so what the daemon and systemd said is in the test log.
        showOnFailure("journal of \(sd.name)") {
            (try? sd.run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "60"]))?.stdout ?? "(no journal)"
        }
        try sanitizedService(sd)
        try sd.check(["systemctl", "enable", "--now", "netpermd.socket"])
        return sd
    }

    /// Under `make asan` (ASAN_OPTIONS names a log_path): the daemon's unit gets the test's sanitizer options but the
    /// path (the service's sandbox writes nowhere of the host's), so a report goes to the container's journal, and is
    /// copied beside the others when the test ends: systemd restarts a daemon that died, and the test might not see it.
    private func sanitizedService(_ sd: RealSystemd) throws {
        guard let options = ProcessInfo.processInfo.environment["ASAN_OPTIONS"],
              let logPath = options.split(separator: ":").first(where: { $0.hasPrefix("log_path=") })?.dropFirst(9) else { return }
        let kept = options.split(separator: ":").filter { !$0.hasPrefix("log_path=") }.joined(separator: ":")
        let symbolizer = Subprocess.resolve("llvm-symbolizer")
        try sd.write("[Service]\nEnvironment=ASAN_OPTIONS=\(kept)\n"
            + (symbolizer.hasPrefix("/") ? "Environment=ASAN_SYMBOLIZER_PATH=\(symbolizer)\n" : ""),
                     to: "/etc/systemd/system/netpermd.service.d/asan.conf")
        try sd.check(["systemctl", "daemon-reload"])
        addTeardownBlock {
            let journal = (try? sd.run(["journalctl", "--no-pager", "-o", "cat", "-u", "netpermd.service"]))?.stdout ?? ""
            guard journal.contains("AddressSanitizer") else { return }
            try? journal.write(toFile: "\(logPath).\(sd.name).journal", atomically: true, encoding: .utf8)
        }
    }

    /// Starts netpermd.service with a shipped drop-in (docs/ENFORCEMENT.md: `netpermd-enforcement.conf` for
    /// Mode=block, `netpermd-steer.conf` for Mode=steer) and waits until STATUS says its rules are in force (and
    /// in steer mode, that it steers).
    func startEnforcing(_ sd: RealSystemd, dropIn: String = "netpermd-enforcement.conf") throws {
        let text = try String(contentsOfFile: Repository.root + "/systemd/" + dropIn, encoding: .utf8)
        try sd.write(text, to: "/etc/systemd/system/netpermd.service.d/" + dropIn)
        try sd.check(["systemctl", "daemon-reload"])
        try sd.check(["systemctl", "start", "netpermd.service"])
        try waitUntil("STATUS says enforcing", timeout: 10, interval: 0.05) {
            let status = try JSONValue.object(sd.check(["/usr/local/bin/netpermctl", "--json", "status"]).lines.last ?? "")
            let e = status["enforcement"] as? [String: Any]
            let steering = (e?["steering"] as? [String: Any])?["state"] as? String
            return (e?["state"] as? String == "enforcing" && [nil, "steering"].contains(steering), "\(e ?? [:])")
        }
    }
}

/// connect() and sendto() out of wwan0 (the default route): "probe TCP MS UDP", each "ok" or the errno's name
/// ("timeout" for a connect() nobody answers within 1 s: the gateway has no address, so a passing SYN goes
/// unanswered).
let wwanProbe = """
    import errno, socket, time
    def name(e): return errno.errorcode.get(e.errno, str(e.errno))
    t = time.monotonic()
    s = socket.socket(); s.settimeout(1)
    try:
        s.connect(("192.0.2.1", 9)); r = "ok"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = name(e)
    ms = int((time.monotonic() - t) * 1000)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b"x", ("192.0.2.1", 9)); r2 = "ok"
    except OSError as e:
        r2 = name(e)
    print("probe", r, ms, r2)
    """
