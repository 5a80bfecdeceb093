// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The Debian packages `make deb` builds, installed with apt-get as an administrator would, in a real systemd booted
/// on a root where netpermd never was (RealSystemd): install, an upgrade to a newer build, remove and purge; and
/// the metrics the packaged timer writes, served by the real node_exporter (Debian's prometheus-node-exporter) and
/// checked by promtool. The packages are those in $NETPERMD_DEBS (`make test` builds them first), else .build/deb.
final class PackageTests: IntegrationTestCase {
    static var debDir: String {
        if let dir = ProcessInfo.processInfo.environment["NETPERMD_DEBS"], !dir.isEmpty { return dir }
        return Repository.root + "/.build/deb"
    }

    static let textfileDir = "/var/lib/prometheus/node-exporter"
    static let socket = "/run/netpermd/netpermd.sock"

    /// The edited policy, enforced: the veths taken as Wi-Fi and cellular, an app denied cellular (and asked about Wi-Fi, so
    /// that a decision for it counts), one asked about cellular (the uid of `nobody`), and the admin group as shipped.
    static let policy = """
        # edited by the administrator
        [Defaults]
        WWAN=allow
        Metered=allow
        AdminGroup=netperm

        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        [App updater]
        User=npt-updater
        WWAN=deny
        WiFi=ask

        [App asker]
        User=nobody
        WWAN=ask

        [Enforcement]
        Mode=block

        """

    /// netpermd_* sample lines of an exposition text, by "NAME{LABELS}".
    private func samples(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("netpermd_") {
            guard let space = line.lastIndex(of: " ") else { continue }
            out[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return out
    }

    private func debs() throws -> (netpermd: String, gio: String, version: String) {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: Self.debDir)) ?? []
        guard let main = files.first(where: { $0.hasPrefix("netpermd_") && $0.hasSuffix(".deb") }),
              let gio = files.first(where: { $0.hasPrefix("netpermd-gio_") && $0.hasSuffix(".deb") }) else {
            throw HarnessError("no netpermd_*.deb and netpermd-gio_*.deb in \(Self.debDir): run `make deb` first "
                + "(`make test` does), or set NETPERMD_DEBS; found \(files)")
        }
        let version = String(main.split(separator: "_")[1])
        return (Self.debDir + "/" + main, Self.debDir + "/" + gio, version)
    }

    /// The packages again, as a newer build: the same contents, the version `VERSION+1`.
    private func newerBuild(of deb: String, into dir: String) throws -> String {
        let tree = dir + "/" + (deb as NSString).lastPathComponent + ".tree"
        try Subprocess.check(["dpkg-deb", "-R", deb, tree])
        let control = tree + "/DEBIAN/control"
        var text = try String(contentsOfFile: control, encoding: .utf8)
        let version = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("Version: ") }?.dropFirst(9))
        text = text.replacingOccurrences(of: "Version: \(version)\n", with: "Version: \(version)+1\n")
        try text.write(toFile: control, atomically: true, encoding: .utf8)
        let out = dir + "/" + (deb as NSString).lastPathComponent.replacingOccurrences(of: "_\(version)_", with: "_\(version)+1_")
        // Uncompressed: xz over 18 MB of programs took longer than the rest of the upgrade.
        try Subprocess.check(["dpkg-deb", "--root-owner-group", "-Znone", "-b", tree, out], timeout: 60)
        return out
    }

    /// apt-get ARGS in the container; prints how long it took.
    @discardableResult
    private func apt(_ sd: RealSystemd, _ args: [String]) throws -> CommandResult {
        let start = monotonicNow()
        let r = try sd.check(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-y", "-q", "-o", "Dpkg::Use-Pty=0"]
                             + args, timeout: 180)
        print(String(format: "PackageTests: apt-get %@ took %.2f s", args[0], monotonicNow() - start))
        return r
    }

    /// What the daemon says of `QUERY` (the caller's own app) to `user`, or nil while it cannot be asked.
    private func query(_ sd: RealSystemd, as user: Int) throws -> [String: Any]? {
        let r = try sd.run(sd.asUser(user, ["/usr/bin/netpermctl", "--json", "query"]))
        guard r.status == 0, let line = r.lines.last else { return nil }
        return try JSONValue.object(line)
    }

    private func journalCount(_ sd: RealSystemd, _ prefix: String) throws -> Int {
        try sd.journal(unit: "netpermd.service").filter { $0.message.hasPrefix(prefix) }.count
    }

    /// The package's bus face (docs/DBUS.md): its user made by sysusers, and once the container's system bus runs
    /// (Debian's dbus, reading the package's bus policy), the daemon owns its name and shows the installed interface.
    private func checkBusFace(_ sd: RealSystemd) throws {
        XCTAssertEqual(try sd.run(["getent", "passwd", "netpermd"]).status, 0, "sysusers made the daemon's user")
        for path in ["/usr/share/dbus-1/interfaces/org.netpermd.NetPerm1.xml",
                     "/usr/share/dbus-1/system.d/org.netpermd.NetPerm1.conf",
                     "/usr/share/polkit-1/actions/org.netpermd.NetPerm1.policy"] {
            XCTAssertTrue(sd.exists(path), "the package installed \(path)")
        }
        try sd.check(["systemctl", "start", "dbus.socket", "dbus.service"])
        var shown = ""
        try waitUntil("the daemon shows its interface on the system bus", timeout: 15, interval: 0.1) {
            let r = try sd.run(["busctl", "--system", "introspect", "--xml-interface", "org.netpermd.NetPerm1",
                                "/org/netpermd/NetPerm1"])
            shown = r.stdout
            return (r.status == 0, r.summary)
        }
        let file = try String(contentsOfFile: sd.root + "/usr/share/dbus-1/interfaces/org.netpermd.NetPerm1.xml", encoding: .utf8)
        for block in file.components(separatedBy: "<interface ").dropFirst() {
            XCTAssertTrue(shown.contains("<interface " + block.components(separatedBy: "</interface>")[0]))
        }
        let uid = try sd.check(["busctl", "--system", "status", "org.netpermd.NetPerm1"]).stdout
        XCTAssertTrue(uid.contains("EUID=\(try sd.check(["id", "-u", "netpermd"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))"), uid)
    }

    func testInstallUpgradeRemovePurgeAndMetricsInNodeExporter() throws {
        let (deb, gioDeb, version) = try debs()
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wwan0", 100)])
        let scratch = try makeTempDir()
        let empty = try makeTempDir()
        chmod(empty, 0o755)
        let boot = monotonicNow()
        let sd = try RealSystemd(namespace: ns, staged: empty, scratch: try makeTempDir())
        print(String(format: "PackageTests: systemd booted in %.2f s", monotonicNow() - boot))
        addTeardownBlock { sd.shutdown() }
        showOnFailure("journal of \(sd.name)") {
            (try? sd.run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "80"]))?.stdout ?? "(no journal)"
        }

        // A root where netpermd never was: nothing of a `make install` or an earlier package on the host shows. And
        // a machine's, not a container image's: the image's policy-rc.d (exit 101) keeps packages from starting
        // their services, as a Docker build wants and no installed system has.
        try sd.check(["sh", "-c", "rm -f /usr/sbin/policy-rc.d /usr/local/bin/netpermd /usr/local/bin/netpermctl "
            + "/usr/local/lib/systemd/system/netpermd* /usr/local/lib/sysusers.d/netpermd.conf "
            + "/usr/local/lib/systemd/user/netpermd-agent.service "
            + "/usr/local/lib/systemd/user/graphical-session.target.wants/netpermd-agent.service "
            + "/usr/local/lib/systemd/user/netpermd-scopes.service "
            + "/usr/local/lib/systemd/user/default.target.wants/netpermd-scopes.service; "
            + "if dpkg-query -W netpermd >/dev/null 2>&1; then dpkg --purge netpermd-gio netpermd; fi; "
            + "rm -rf /etc/netpermd /var/lib/private/netpermd /var/lib/netpermd; "
            + "mkdir -p \(Self.textfileDir); systemctl daemon-reload"])
        XCTAssertNotEqual(try sd.run(["getent", "group", "netperm"]).status, 0, "the group comes from the package")
        let pkgDir = "/var/tmp/npt-debs"
        try FileManager.default.createDirectory(atPath: sd.root + pkgDir, withIntermediateDirectories: true)
        for f in [deb, gioDeb] {
            try FileManager.default.copyItem(atPath: f, toPath: sd.root + pkgDir + "/" + (f as NSString).lastPathComponent)
        }

        // Install, and time it until a non-root user's first answered query.
        let start = monotonicNow()
        try apt(sd, ["install", pkgDir + "/" + (deb as NSString).lastPathComponent,
                     pkgDir + "/" + (gioDeb as NSString).lastPathComponent])
        let installed = monotonicNow()
        var first: [String: Any]?
        try waitUntil("nobody's first query is answered", timeout: 10) {
            let r = try sd.run(sd.asUser(65534, ["/usr/bin/netpermctl", "--json", "query"]))
            first = r.status == 0 ? try JSONValue.object(r.lines.last ?? "") : nil
            return (first != nil, r.summary + "\n" + ((try? sd.run(["systemctl", "status", "--no-pager", "netpermd.socket",
                                                                    "netpermd.service"]).stdout) ?? ""))
        }
        let answered = monotonicNow()
        print(String(format: "PackageTests: apt-get install took %.2f s; nobody's first query was answered %.2f s "
                     + "after apt-get install started (%.3f s after it returned)", installed - start, answered - start,
                     answered - installed))
        XCTAssertEqual(first?["ok"] as? Bool, true, "\(first ?? [:])")
        XCTAssertEqual((first?["identity"] as? [String: Any])?["uid"] as? Int, 65534)
        XCTAssertEqual(try sd.property("netpermd.socket", "ActiveState"), "active")
        XCTAssertEqual(try sd.property("netpermd.socket", "Listen"), Self.socket + " (Stream)")
        for unit in ["netpermd.socket", "netpermd.service", "netpermd-metrics.timer", "netpermd-metrics.path"] {
            XCTAssertEqual(try sd.run(["systemctl", "is-enabled", unit]).stdout, "enabled\n", unit)
        }
        XCTAssertEqual(try sd.property("netpermd-metrics.timer", "ActiveState"), "active")
        // Started by the postinst, the timer has already run the writer once (OnActiveSec=0), and runs it next 30 s
        // after that run.
        try waitUntil("the timer wrote the metrics", timeout: 10, interval: 0.05) {
            (sd.exists(Self.textfileDir + "/netpermd.prom"), "no \(Self.textfileDir)/netpermd.prom")
        }
        let ran = try XCTUnwrap(UInt64(sd.property("netpermd-metrics.service", "ExecMainStartTimestampMonotonic")))
        let nextText = try sd.property("netpermd-metrics.timer", "NextElapseUSecMonotonic")
        let next = try XCTUnwrap(Self.microseconds(timespan: nextText), nextText)
        XCTAssertEqual(Double(next) - Double(ran), 30e6, accuracy: 1.5e6, "the next run is 30 s after this one")
        XCTAssertEqual(try sd.run(["getent", "group", "netperm"]).status, 0, "sysusers made the group")
        let conffiles = try sd.check(["dpkg-query", "-W", "-f", "${Conffiles}", "netpermd"]).stdout
        XCTAssertTrue(conffiles.contains("/etc/netpermd/netpermd.conf "), conffiles)
        for path in ["/usr/share/man/man1/netpermctl.1.gz", "/usr/share/man/man8/netpermd.8.gz",
                     "/usr/share/man/man5/netpermd.conf.5.gz", "/usr/share/bash-completion/completions/netpermctl",
                     "/usr/share/zsh/vendor-completions/_netpermctl", "/usr/lib/sysusers.d/netpermd.conf",
                     "/usr/share/doc/netpermd/METRICS.md"] {
            XCTAssertTrue(sd.exists(path), "the package installed \(path)")
        }
        XCTAssertEqual(try sd.check(["systemctl", "show", "-p", "ExecStart", "--value", "netpermd.service"]).stdout
            .contains("path=/usr/sbin/netpermd"), true, "the units name the package's paths")
        let gioDir = try sd.check(["pkg-config", "--variable=giomoduledir", "gio-2.0"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        func gioCache() -> String { (try? String(contentsOfFile: sd.root + gioDir + "/giomodule.cache", encoding: .utf8)) ?? "" }
        XCTAssertTrue(gioCache().contains("libgionetpermd.so: gio-network-monitor"), "GLib's trigger: \(gioCache())")

        // Issue 36, point 16: an administrator deletes the conffile (dpkg then keeps it deleted): the daemon runs on
        // its built-in defaults, as netpermd.conf(5) says, where the unit's explicit --config put it in a restart loop.
        try sd.check(["rm", "/etc/netpermd/netpermd.conf"])
        let restart = try sd.run(["systemctl", "restart", "netpermd.service"])
        XCTAssertEqual(restart.status, 0, restart.summary)
        XCTAssertEqual(try sd.property("netpermd.service", "ActiveState"), "active")
        XCTAssertEqual(try query(sd, as: 65534)?["ok"] as? Bool, true, "answered on the built-in defaults")
        try checkBusFace(sd)

        // The administrator edits the policy and reloads; a member of the packaged group may do what root may.
        try sd.addUser("npt-updater", uid: 4201)
        try sd.addUser("npt-admin", uid: 4202)
        try sd.check(["usermod", "-a", "-G", "netperm", "npt-admin"])
        try agentUnitIsEnabled(sd, forUser: 4201)
        // Its Mode=block needs the drop-in the package ships among its docs (docs/ENFORCEMENT.md).
        // Issue 36, point 17: under /usr/share/netpermd, which a system keeping no docs still has.
        try sd.check(["install", "-D", "-m", "0644", "/usr/share/netpermd/netpermd-enforcement.conf",
                      "/etc/systemd/system/netpermd.service.d/enforcement.conf"])
        try sd.check(["systemctl", "daemon-reload"])
        try sd.write(Self.policy, to: "/etc/netpermd/netpermd.conf")
        try sd.check(["systemctl", "restart", "netpermd.service"])
        try waitUntil("the rules are in force", timeout: 10, interval: 0.05) {
            let s = try JSONValue.object(sd.check(["/usr/bin/netpermctl", "--json", "status"]).lines.last ?? "")
            let state = (s["enforcement"] as? [String: Any])?["state"] as? String
            return (state == "enforcing", "\(s["enforcement"] ?? "no enforcement")")
        }
        let apps = try sd.run(sd.asUser(4202, ["/usr/bin/netpermctl", "--json", "apps"]))
        XCTAssertEqual(apps.status, 0, "group netperm may list the apps: \(apps.summary)")
        XCTAssertEqual(try query(sd, as: 4201)?["reason"] as? String, "denied")
        // A lasting decision, to be kept across the upgrade.
        try sd.check(["/usr/bin/netpermctl", "decide", "updater", "wifi", "deny"])

        // A prompt: an agent listens (this process, root), and the app set to ask asks about itself.
        let agent = try LiveConnection(path: sd.root + Self.socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("prompts")
        XCTAssertEqual(try query(sd, as: 65534)?["reason"] as? String, "awaiting-decision")
        _ = try agent.objects(until: "the prompt for asker") { $0["event"] as? String == "prompt" && $0["app"] as? String == "asker" }

        // The packaged writer, then node_exporter serving the directory on the container's own loopback.
        let scrape = monotonicNow()
        try sd.check(["systemctl", "start", "netpermd-metrics.service"])
        let written = try String(contentsOfFile: sd.root + Self.textfileDir + "/netpermd.prom", encoding: .utf8)
        var st = stat()
        XCTAssertEqual(stat(sd.root + Self.textfileDir + "/netpermd.prom", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o644, "node_exporter's user must read it")
        let left = try FileManager.default.contentsOfDirectory(atPath: sd.root + Self.textfileDir)
        XCTAssertEqual(left.filter { $0.hasPrefix("netpermd.prom.") }, [], "no temporary file left")
        // Without node_exporter's directory the writer does not run at all, and (issue 36, 18) neither does its
        // timer: the service was skipped, and said so in the journal, every 30 s. The directory appearing starts it.
        try sd.check(["mv", Self.textfileDir, Self.textfileDir + ".off"])
        try sd.check(["systemctl", "start", "netpermd-metrics.service"])
        XCTAssertEqual(try sd.property("netpermd-metrics.service", "ConditionResult"), "no")
        XCTAssertFalse(sd.exists(Self.textfileDir), "nothing made the directory")
        try sd.check(["systemctl", "restart", "netpermd-metrics.timer"])
        XCTAssertEqual(try sd.property("netpermd-metrics.timer", "ConditionResult"), "no")
        XCTAssertEqual(try sd.property("netpermd-metrics.timer", "ActiveState"), "inactive", "no timer, no skipped runs")
        try sd.check(["rm", "-f", Self.textfileDir + ".off/netpermd.prom"])
        try sd.check(["mv", Self.textfileDir + ".off", Self.textfileDir])
        try waitUntil("the directory's return starts the timer, which writes", timeout: 10, interval: 0.1) {
            (sd.exists(Self.textfileDir + "/netpermd.prom"), try sd.property("netpermd-metrics.timer", "ActiveState"))
        }
        let daemon = samples(try sd.check(["/usr/bin/netpermctl", "metrics"]).stdout)
        let exporter = try Repository.requireTool("prometheus-node-exporter", package: "prometheus-node-exporter")
        try sd.check(["systemd-run", "--unit=npt-node-exporter", "--property=Type=exec", exporter,
                      "--web.listen-address=127.0.0.1:9100", "--collector.disable-defaults", "--collector.textfile",
                      "--collector.textfile.directory=\(Self.textfileDir)"])
        var scraped = ""
        try waitUntil("node_exporter serves /metrics", timeout: 10, interval: 0.1) {
            let r = try sd.run(["curl", "-sf", "http://127.0.0.1:9100/metrics"])
            scraped = r.stdout
            return (r.status == 0 && scraped.contains("netpermd_"), r.summary)
        }
        let served = samples(scraped)
        let wwanUp = "netpermd_links{kind=\"wwan\",metered=\"true\",usable=\"true\"}"
        let expected = [
            wwanUp: "1", "netpermd_apps{reason=\"denied\"}": "1",
            "netpermd_apps{reason=\"awaiting-decision\"}": "1",
            "netpermd_prompts_raised_total{trigger=\"request\"}": "1",
            "netpermd_decisions{decision=\"deny\",source=\"lasting\"}": "1",
            "netpermd_build_info{version=\"\(version)\"}": "1",
            "netpermd_enforcement_state{state=\"enforcing\"}": "1", "netpermd_enforcement_apps": "2",
        ]
        for (series, value) in expected {
            XCTAssertEqual(served[series], value, "node_exporter's \(series); served:\n\(scraped.prefix(6000))")
            // node_exporter sorts labels by name; the daemon writes them in its own order.
            let daemonSeries = daemon.first { normalized($0.key) == series }
            XCTAssertEqual(daemonSeries?.value, value, "the daemon's own \(series)")
        }
        let textfileLines = scraped.split(separator: "\n").filter { $0.contains("textfile") }.joined(separator: "\n")
        XCTAssertTrue(scraped.contains("node_textfile_mtime_seconds{file=\"\(Self.textfileDir)/netpermd.prom\"}"),
                      "the file's age is served: \(textfileLines)")
        XCTAssertTrue(scraped.contains("node_textfile_scrape_error 0"), "node_exporter read the file without error: "
            + textfileLines + "\n" + ((try? sd.run(["journalctl", "--no-pager", "-u", "npt-node-exporter"]).stdout) ?? ""))
        let promtool = try Repository.requireTool("promtool", package: "prometheus")
        for (what, text) in [("the textfile", written),
                             ("node_exporter's netpermd_ series",
                              scraped.split(separator: "\n").filter { $0.contains("netpermd_") }.joined(separator: "\n") + "\n")] {
            let r = try Subprocess.run([promtool, "check", "metrics"], input: Array(text.utf8))
            XCTAssertEqual(r.status, 0, "promtool on \(what): \(r.summary)")
            XCTAssertEqual(r.stdout + r.stderr, "", "promtool on \(what)")
        }
        agent.close()
        print(String(format: "PackageTests: the metrics through node_exporter took %.2f s", monotonicNow() - scrape))

        // Upgrade to a newer build: the edited config and the decisions stay, the service restarts once, the
        // socket never stops listening.
        let repack = monotonicNow()
        let newer = try [deb, gioDeb].map { try newerBuild(of: $0, into: scratch) }
        print(String(format: "PackageTests: the newer build took %.2f s to make", monotonicNow() - repack))
        for f in newer {
            try FileManager.default.copyItem(atPath: f, toPath: sd.root + pkgDir + "/" + (f as NSString).lastPathComponent)
        }
        let readyBefore = try journalCount(sd, "ready: ")
        let socketSince = try sd.property("netpermd.socket", "ActiveEnterTimestampMonotonic")
        let pidBefore = try sd.property("netpermd.service", "MainPID")
        try apt(sd, ["install"] + newer.map { pkgDir + "/" + ($0 as NSString).lastPathComponent })
        XCTAssertEqual(try sd.check(["dpkg-query", "-W", "-f", "${Version}", "netpermd"]).stdout, version + "+1")
        try waitUntil("the upgraded daemon is ready", timeout: 10) {
            let n = try journalCount(sd, "ready: ")
            let state = try sd.property("netpermd.service", "ActiveState")
            return (n > readyBefore && state == "active", "\(n) ready lines, \(state)")
        }
        XCTAssertEqual(try journalCount(sd, "ready: "), readyBefore + 1, "the service restarted once")
        XCTAssertNotEqual(try sd.property("netpermd.service", "MainPID"), pidBefore)
        XCTAssertEqual(try sd.property("netpermd.socket", "ActiveEnterTimestampMonotonic"), socketSince,
                       "the socket kept listening")
        XCTAssertEqual(try String(contentsOfFile: sd.root + "/etc/netpermd/netpermd.conf", encoding: .utf8), Self.policy)
        let kept = try JSONValue.object(sd.check(["/usr/bin/netpermctl", "--json", "query", "updater"]).lines.last ?? "")
        XCTAssertEqual((kept["sources"] as? [String: Any])?["wifi"] as? String, "decision", "\(kept)")
        XCTAssertEqual(try query(sd, as: 4201)?["reason"] as? String, "denied", "the edited policy is in force")

        // Remove: stopped, its rules gone with it, the programs and units gone, config and decisions kept, the
        // metrics file gone.
        XCTAssertEqual(try sd.run(["nft", "list", "table", "inet", "netpermd"]).status, 0, "the rules before remove")
        try apt(sd, ["remove", "netpermd", "netpermd-gio"])
        let table = try sd.run(["nft", "list", "table", "inet", "netpermd"])
        XCTAssertNotEqual(table.status, 0, "a removed daemon's rules must not stay in force: \(table.summary)")
        XCTAssertEqual(try sd.run(["systemctl", "is-active", "netpermd.service", "netpermd.socket"]).stdout,
                       "inactive\ninactive\n")
        XCTAssertFalse(sd.exists(Self.socket))
        XCTAssertFalse(sd.exists("/usr/sbin/netpermd"))
        XCTAssertFalse(sd.exists("/usr/lib/systemd/system/netpermd.service"))
        XCTAssertFalse(sd.exists(Self.agentUnit), "the agent's user unit goes with the package")
        XCTAssertEqual(try String(contentsOfFile: sd.root + "/etc/netpermd/netpermd.conf", encoding: .utf8), Self.policy)
        XCTAssertTrue(sd.exists("/var/lib/private/netpermd/decisions.conf"), "the decisions are kept")
        XCTAssertFalse(sd.exists(Self.textfileDir + "/netpermd.prom"), "no stale metrics for node_exporter")
        XCTAssertFalse(gioCache().contains("netpermd"), "GLib's trigger dropped the module: \(gioCache())")
        XCTAssertEqual(try sd.check(["dpkg-query", "-W", "-f", "${Status}", "netpermd"]).stdout,
                       "deinstall ok config-files")

        // Purge: config and state gone too.
        try apt(sd, ["purge", "netpermd", "netpermd-gio"])
        for path in ["/etc/netpermd", "/var/lib/private/netpermd", "/var/lib/netpermd"] {
            XCTAssertFalse(sd.exists(path), "purge removed \(path)")
        }
        XCTAssertNotEqual(try sd.run(["sh", "-c", "dpkg-query -W -f '${Status}' netpermd | grep -q installed"]).status, 0)
        XCTAssertFalse(sd.exists(Self.agentUnit), "purge removed the agent's user unit")
        XCTAssertFalse(sd.exists("/usr/lib/systemd/user/netpermd-scopes.service"), "purge removed the scopes' user unit")
        XCTAssertNotEqual(try sd.run(["systemctl", "--global", "is-enabled", "netpermd-scopes.service"]).stdout, "enabled\n")
        let link = try sd.run(["readlink", Self.agentWants])
        XCTAssertNotEqual(link.status, 0, "purge removed the agent's enabling link: \(link.summary)")
        XCTAssertNotEqual(try sd.run(["systemctl", "--global", "is-enabled", "netpermd-agent.service"]).stdout, "enabled\n")
    }

    static let agentUnit = "/usr/lib/systemd/user/netpermd-agent.service"
    /// Where `systemctl --global enable` (dh_installsystemduser's postinst) puts the link for every user.
    static let agentWants = "/etc/systemd/user/graphical-session.target.wants/netpermd-agent.service"

    /// The agent's user unit is where a user's own manager (`user@UID.service`) finds it, enabled for every user's
    /// graphical session as Debian enables user units: the manager loads it from the package's file, and
    /// `graphical-session.target` wants it.
    private func agentUnitIsEnabled(_ sd: RealSystemd, forUser uid: Int) throws {
        XCTAssertTrue(sd.exists(Self.agentUnit))
        XCTAssertEqual(try sd.run(["readlink", "-f", Self.agentWants]).stdout, Self.agentUnit + "\n")
        XCTAssertFalse(sd.exists("/usr/lib/systemd/user/graphical-session.target.wants/netpermd-agent.service"),
                       "enabled once, by the postinst, not by a link in the package too")
        XCTAssertEqual(try sd.run(["systemctl", "--global", "is-enabled", "netpermd-agent.service"]).stdout, "enabled\n")
        try sd.startUserManager(uid: uid)
        defer { sd.stopUserManager(uid: uid) }
        let shown = try sd.check(sd.asUser(uid, ["systemctl", "--user", "show", "-p", "FragmentPath", "-p", "UnitFileState",
                                                 "-p", "ExecStart", "netpermd-agent.service"])).stdout
        XCTAssertTrue(shown.contains("FragmentPath=\(Self.agentUnit)\n"), shown)
        XCTAssertTrue(shown.contains("UnitFileState=enabled\n"), shown)
        XCTAssertTrue(shown.contains("path=/usr/bin/netpermctl ; argv[]=/usr/bin/netpermctl agent --notify"), shown)
        let wants = try sd.check(sd.asUser(uid, ["systemctl", "--user", "show", "-p", "Wants", "--value",
                                                 "graphical-session.target"])).stdout
        XCTAssertTrue(wants.split(separator: " ").contains { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "netpermd-agent.service" },
                      "the user's graphical-session.target wants it: \(wants)")
        // The maker of apps' scopes runs in every session from the start, subscribed to the daemon (docs/APPS.md).
        XCTAssertEqual(try sd.run(["systemctl", "--global", "is-enabled", "netpermd-scopes.service"]).stdout, "enabled\n")
        try waitUntil("the user's netpermd-scopes.service runs", timeout: 15, interval: 0.1) {
            let s = try sd.check(sd.asUser(uid, ["systemctl", "--user", "show", "-p", "ActiveState", "-p", "SubState",
                                                 "-p", "ExecStart", "netpermd-scopes.service"])).stdout
            return (s.contains("ActiveState=active\n") && s.contains("SubState=running\n")
                    && s.contains("argv[]=/usr/bin/netpermctl scopes"), s)
        }
    }

    /// systemd's timespan ("1h 2min 3.456789s", as `systemctl show` prints a monotonic time) in microseconds.
    static func microseconds(timespan: String) -> UInt64? {
        let units: [(String, Double)] = [("min", 60e6), ("ms", 1e3), ("us", 1), ("h", 3600e6), ("d", 86400e6), ("s", 1e6)]
        var total = 0.0
        for word in timespan.split(separator: " ") {
            guard let (unit, factor) = units.first(where: { word.hasSuffix($0.0) }),
                  let n = Double(word.dropLast(unit.count)) else { return nil }
            total += n * factor
        }
        return timespan.isEmpty ? nil : UInt64(total)
    }

    /// `{b="1",a="2"}` with its labels in name order, as node_exporter writes them.
    private func normalized(_ series: String) -> String {
        guard let open = series.firstIndex(of: "{"), series.hasSuffix("}") else { return series }
        let labels = series[series.index(after: open)..<series.index(before: series.endIndex)]
            .split(separator: ",").sorted()
        return series[..<open] + "{" + labels.joined(separator: ",") + "}"
    }
}
