// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Desktop apps (docs/APPS.md, "Desktop apps") under a real systemd (RealSystemd) and a user's real `systemd --user`
/// (RealSystemdUsers), launched as GNOME Shell and Flatpak launch them: each in a scope of its own named for its
/// application ID. No policy line names them: `[Defaults] WWAN=ask` asks the app by the name its desktop file
/// gives, the user's agent unit shows the notification (python-dbusmock's notification_daemon), and the answer is
/// that uid's, for that app.
final class RealSystemdDesktopAppTests: IntegrationTestCase {
    static let uid = 4030
    static let dataDir = "/usr/local/lib/npt/share"

    static let policy = """
        [Enforcement]
        Mode=block

        [Defaults]
        WWAN=ask

        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        """

    func testADesktopAppIsNamedEnforcedAndAsked() throws {
        let sd = try bootRealSystemd(policy: Self.policy)
        showTableAndJournalOnFailure(sd)
        try sd.write("""
            [Desktop Entry]
            Type=Application
            Name=Maps
            Name[de]=Karten
            Icon=org.example.Maps
            Exec=/usr/bin/false

            """, to: Self.dataDir + "/applications/org.example.Maps.desktop")
        try sd.write("[Service]\nEnvironment=XDG_DATA_DIRS=\(Self.dataDir)\n",
                     to: "/etc/systemd/system/netpermd.service.d/desktop.conf")
        try startEnforcing(sd)

        // A user with a home of their own (0700, as Debian 12 makes them), and a desktop file of their own there.
        try sd.check(["useradd", "--uid", String(Self.uid), "--user-group", "--create-home", "--home-dir", "/home/npt-desk",
                      "--shell", "/bin/sh", "npt-desk"])
        try sd.check(["chmod", "0700", "/home/npt-desk"])
        try sd.write("[Desktop Entry]\nType=Application\nName=Mine\nIcon=mine\n",
                     to: "/home/npt-desk/.local/share/applications/org.example.Mine.desktop")
        try sd.check(["chown", "-R", "npt-desk:npt-desk", "/home/npt-desk/.local"])
        addTeardownBlock { sd.stopUserManager(uid: Self.uid) }
        try sd.startUserManager(uid: Self.uid)
        let bus = "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/\(Self.uid)/bus"
        func user(_ argv: [String]) -> [String] {
            sd.asUser(Self.uid, argv, environment: ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/npt-desk",
                                                    "XDG_RUNTIME_DIR=/run/user/\(Self.uid)", bus])
        }

        // The user's own APPS: the app installed for everyone and theirs, by name, before either ever ran.
        try waitUntil("the user's APPS lists both desktop apps", timeout: 10, interval: 0.05) {
            let r = try sd.check(user(["netpermctl", "--json", "apps"]))
            let apps = (try JSONValue.object(r.lines.last ?? "")["apps"] as? [[String: Any]]) ?? []
            let named = apps.map { "\($0["app"] ?? "?")=\($0["name"] ?? "-")" }
            return (named == ["org.example.Maps=Maps", "org.example.Mine=Mine"], "\(named)")
        }
        let rootApps = try JSONValue.object(sd.check(["netpermctl", "--json", "apps"]).lines.last ?? "")["apps"] as? [[String: Any]]
        XCTAssertEqual(rootApps?.compactMap { $0["app"] as? String }, ["org.example.Maps"],
                       "a user's own desktop file names that user's apps, not everyone's")

        // A hostile user's own files: a symlink to /etc/shadow, a FIFO, a 1 MiB file, 10,000 files, and their own
        // app named with terminal escapes. Theirs only: nothing changes for the other user or for everyone.
        try sd.check(["useradd", "--uid", "4031", "--user-group", "--create-home", "--home-dir", "/home/npt-hostile",
                      "--shell", "/bin/sh", "npt-hostile"])
        try sd.check(["/usr/bin/python3", "-c", """
            import os
            d = "/home/npt-hostile/.local/share/applications"
            os.makedirs(d)
            os.symlink("/etc/shadow", d + "/org.example.Shadow.desktop")
            os.mkfifo(d + "/org.example.Fifo.desktop")
            open(d + "/org.example.Huge.desktop", "w").write("[Desktop Entry]\\nName=Huge\\n" + "#" * (1 << 20))
            open(d + "/org.example.Bank.desktop", "w").write("[Desktop Entry]\\nName=\\x1b[2J\\x1b]0;owned\\x07Bank\\n")
            for i in range(10000):
                open(d + "/org.example.H%05d.desktop" % i, "w").write("[Desktop Entry]\\nName=H\\n")
            """])
        try sd.check(["chown", "-R", "npt-hostile:npt-hostile", "/home/npt-hostile/.local"])
        addTeardownBlock { sd.stopUserManager(uid: 4031) }
        try sd.startUserManager(uid: 4031)
        func apps(_ argv: [String]) throws -> [String: String] {
            let list = (try JSONValue.object(sd.check(argv).lines.last ?? "")["apps"] as? [[String: Any]]) ?? []
            return Dictionary(list.map { ("\($0["app"] ?? "?")", "\($0["name"] ?? "-")") }, uniquingKeysWith: { a, _ in a })
        }
        var hostile: [String: String] = [:]
        try waitUntil("the hostile user's files are read", timeout: 20, interval: 0.1) {
            hostile = try apps(sd.asUser(4031, ["netpermctl", "--json", "apps"]))
            return (hostile["org.example.Bank"] == "\\x1b[2J\\x1b]0;owned\\x07Bank", "\(hostile.count) apps, Bank: \(hostile["org.example.Bank"] ?? "-")")
        }
        XCTAssertNil(hostile["org.example.Shadow"], "a symlink to a file the user does not own")
        XCTAssertNil(hostile["org.example.Fifo"])
        XCTAssertNil(hostile["org.example.Huge"])
        let read = hostile.keys.filter { $0.hasPrefix("org.example.H0") }.count
        XCTAssertTrue(read > 900 && read <= 1000, "at most 1,000 files of a directory are read: \(read)")
        XCTAssertEqual(hostile["org.example.Maps"], "Maps", "everyone's Maps, still named by its own file")
        XCTAssertEqual(try apps(user(["netpermctl", "--json", "apps"])), ["org.example.Maps": "Maps", "org.example.Mine": "Mine"])
        XCTAssertEqual(try apps(["netpermctl", "--json", "apps"]), ["org.example.Maps": "Maps"])
        XCTAssertTrue(try sd.check(["journalctl", "--no-pager", "-o", "cat", "-u", "netpermd.service"]).stdout
            .contains("more than 1000 desktop files, the rest not read"))

        // The notification server and the agent unit, on the user's session bus.
        let server = try UserNotifications(self, sd, bus: bus, user: user)
        func calls() throws -> [[String: Any]] { try server.calls() }
        try sd.check(user(["systemctl", "--user", "start", "netpermd-agent.service"]))
        try waitUntil("the agent asked the server", timeout: 10) {
            (try calls().contains { $0["method"] as? String == "GetCapabilities" }, "")
        }

        // Maps as GNOME Shell starts it: QUERY from inside names it, and its first connection over wwan is refused.
        let maps = try runInScope(sd, unit: "app-gnome-org.example.Maps-1234.scope", user: user) { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (RealSystemdUserRunTests.elements(of: "user5_wwan", in: table).contains("\"\(cgroup)\" : goto "), table)
        }
        XCTAssertEqual(maps.query["app"] as? String, "org.example.Maps", "\(maps.query)")
        XCTAssertEqual(maps.query["name"] as? String, "Maps", "\(maps.query)")
        XCTAssertEqual(maps.query["icon"] as? String, "org.example.Maps", "\(maps.query)")
        XCTAssertEqual(maps.query["matched_by"] as? String, "desktop", "\(maps.query)")
        XCTAssertEqual(maps.query["reason"] as? String, "awaiting-decision", "\(maps.query)")
        let refused = try maps.probe
        XCTAssertTrue(refused.refused, "its first connection over wwan0: \(refused)\n\(maps.output)")

        // Its QUERY asked (that prompt went with the netpermctl that asked); its refused connection asks again, by
        // the app's name and icon, one notification on the screen; the person allows it.
        var notify: [Any] = []
        var shown = 0
        try waitUntil("the refused connection's notification is shown", timeout: 10) {
            let all = try calls()
            shown = all.filter { $0["method"] as? String == "Notify" }.count
            notify = all.last { $0["method"] as? String == "Notify" }?["args"] as? [Any] ?? []
            return ((notify.dropFirst(4).first as? String)?.contains("was refused a connection") == true, "\(all)")
        }
        XCTAssertEqual(shown - (try calls().filter { $0["method"] as? String == "CloseNotification" }.count), 1,
                       "one prompt on the screen")
        XCTAssertEqual(notify[2] as? String, "org.example.Maps", "the app's icon: \(notify)")
        XCTAssertEqual(notify[3] as? String, "Allow “Maps” to use cellular data?", "\(notify)")
        XCTAssertTrue((notify[4] as? String)?.hasPrefix("Maps (org.example.Maps, run by npt-desk") == true, "\(notify)")
        try server.click(shown, "allow")
        try waitUntil("the answer is stored for the user's Maps", timeout: 10, interval: 0.05) {
            let d = (try? sd.check(["cat", "/var/lib/netpermd/decisions.conf"]).stdout) ?? ""
            return (d.contains("[User 4030 org.example.Maps]\nWWAN=allow\n"), d)
        }

        // Launched again: allowed, for this uid; everyone else's Maps is still asked.
        let again = try runInScope(sd, unit: "app-gnome-org.example.Maps-1235.scope", user: user) { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (Self.allowedByTheRules(cgroup, table), table)
        }
        XCTAssertEqual(again.query["available"] as? Bool, true, "\(again.query)")
        let passed = try again.probe
        XCTAssertTrue(passed.passed, "the user's Maps after Allow: \(passed)\n\(again.output)")
        let everyone = try JSONValue.object(sd.check(["netpermctl", "--json", "query", "org.example.Maps"]).lines.last ?? "")
        XCTAssertEqual((everyone["sources"] as? [String: Any])?["wwan"] as? String, "no-agent",
                       "still asked (and with no agent for everyone, denied): \(everyone)")

        // Flatpak's name for an app no desktop file names: the app by its ID.
        let notes = try runInScope(sd, unit: "app-flatpak-org.example.Notes-77.scope", user: user, probe: "print('probe')") { _ in (true, "") }
        XCTAssertEqual(notes.query["app"] as? String, "org.example.Notes", "\(notes.query)")
        XCTAssertNil(notes.query["name"], "\(notes.query)")

        // An [App] section overrides [Defaults]; DesktopApps=no restores matching by executable only.
        try sd.write(Self.policy + "[App org.example.Notes]\nWWAN=deny\n", to: "/etc/netpermd/netpermd.conf")
        try sd.check(["netpermctl", "reload"])
        let denied = try runInScope(sd, unit: "app-flatpak-org.example.Notes-78.scope", user: user, probe: "print('probe')") { _ in (true, "") }
        XCTAssertEqual((denied.query["permissions"] as? [String: Any])?["wwan"] as? String, "deny", "\(denied.query)")
        try sd.write(Self.policy.replacingOccurrences(of: "WWAN=ask\n", with: "WWAN=ask\nDesktopApps=no\n"),
                     to: "/etc/netpermd/netpermd.conf")
        try sd.check(["netpermctl", "reload"])
        let off = try runInScope(sd, unit: "app-gnome-org.example.Maps-1236.scope", user: user, probe: "print('probe')") { _ in (true, "") }
        XCTAssertEqual(off.query["matched_by"] as? String, "default", "\(off.query)")
    }

    /// Debian's own desktop IDs are not reverse-DNS (issue 47): Firefox ESR as GNOME Shell starts it,
    /// `app-gnome-firefox\x2desr-PID.scope`, is the app `firefox-esr` because `firefox-esr.desktop` is installed:
    /// listed and named (in German for a German caller); `[Defaults] WWAN=ask` and `Mode=block` refuse its first
    /// datagram and raise one prompt by its name; the person's answer lets it out for their uid only (another user's
    /// Firefox ESR is still refused, awaiting its own). `[Defaults]` hold no process that is not an app: a scope named
    /// after an app that is not installed passes.
    func testADebianAppIsKnownByItsInstalledEntry() throws {
        let sd = try bootRealSystemd(policy: Self.policy)
        showTableAndJournalOnFailure(sd)
        try sd.write("""
            [Desktop Entry]
            Type=Application
            Name=Firefox ESR
            Name[de]=Firefox ESR (Webbrowser)
            Icon=firefox-esr
            TryExec=sh
            Exec=/usr/lib/firefox-esr/firefox-esr %u

            """, to: Self.dataDir + "/applications/firefox-esr.desktop")
        // GLib drops an entry whose TryExec= is missing: never listed, never an app.
        try sd.write("[Desktop Entry]\nType=Application\nName=Gone\nTryExec=npt-no-such-program\n",
                     to: Self.dataDir + "/applications/gone.desktop")
        try sd.write("[Service]\nEnvironment=XDG_DATA_DIRS=\(Self.dataDir)\n",
                     to: "/etc/systemd/system/netpermd.service.d/desktop.conf")
        try startEnforcing(sd)
        try sd.check(["useradd", "--uid", String(Self.uid), "--user-group", "--create-home", "--home-dir", "/home/npt-desk",
                      "--shell", "/bin/sh", "npt-desk"])
        addTeardownBlock { sd.stopUserManager(uid: Self.uid) }
        try sd.startUserManager(uid: Self.uid)
        let bus = "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/\(Self.uid)/bus"
        func user(_ argv: [String], lang: String = "C.UTF-8") -> [String] {
            sd.asUser(Self.uid, argv, environment: ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/npt-desk",
                                                    "XDG_RUNTIME_DIR=/run/user/\(Self.uid)", bus, "LANG=" + lang])
        }
        try waitUntil("the user's APPS lists Firefox ESR", timeout: 10, interval: 0.05) {
            let r = try sd.check(user(["netpermctl", "--json", "apps"]))
            let apps = (try JSONValue.object(r.lines.last ?? "")["apps"] as? [[String: Any]]) ?? []
            let named = apps.map { "\($0["app"] ?? "?")=\($0["name"] ?? "-")" }
            return (named == ["firefox-esr=Firefox ESR"], "\(named)")
        }
        let german = try sd.check(user(["netpermctl", "apps"], lang: "de_DE.UTF-8")).stdout
        XCTAssertTrue(german.contains("firefox-esr (Firefox ESR (Webbrowser))"), german)
        XCTAssertTrue(try sd.check(user(["netpermctl", "apps"])).stdout.contains("firefox-esr (Firefox ESR)"))

        try subscribeToPrompts(sd, user: { user($0) })
        let unit = "app-gnome-firefox\\x2desr-4242.scope"
        let firefox = try runInScope(sd, unit: unit, user: { user($0) }) { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (RealSystemdUserRunTests.elements(of: "user5_wwan", in: table).contains("\"\(cgroup)\" : goto "), table)
        }
        XCTAssertEqual(firefox.query["app"] as? String, "firefox-esr", "\(firefox.query)")
        XCTAssertEqual(firefox.query["matched_by"] as? String, "desktop", "\(firefox.query)")
        XCTAssertEqual(firefox.query["name"] as? String, "Firefox ESR", "\(firefox.query)")
        XCTAssertEqual((firefox.query["names"] as? [String: Any])?["de"] as? String, "Firefox ESR (Webbrowser)")
        XCTAssertEqual(firefox.query["reason"] as? String, "awaiting-decision", "\(firefox.query)")
        let refused = try firefox.probe
        XCTAssertTrue(refused.refused, "its first datagram over wwan0: \(refused)\n\(firefox.output)")

        // Named after apps that are not installed (none, or deleted by TryExec=): no app, not held by [Defaults].
        for other in ["app-gnome-gimp-4243.scope", "app-gnome-gone-4244.scope"] {
            let scope = try runInScope(sd, unit: other, user: { user($0) }) { _ in (true, "") }
            XCTAssertEqual(scope.query["matched_by"] as? String, "default", "\(scope.query)")
            let passed = try scope.probe
            XCTAssertTrue(passed.passed, "\(other): \(passed)\n\(scope.output)")
        }
        try checkAskedAndAnsweredForItsUidOnly(sd, user: { user($0) })
    }

    private static let socket = "UNIX-CONNECT:/run/netpermd/netpermd.sock"

    /// The user's agent: a subscriber of their prompts (a unit of their manager), once the daemon has taken it.
    private func subscribeToPrompts(_ sd: RealSystemd, user: ([String]) -> [String]) throws {
        let out = "/tmp/npt-prompts-\(Self.uid).out"
        try sd.check(user(["systemd-run", "--user", "--quiet", "--unit=npt-prompts.service", "-p", "StandardOutput=file:" + out,
                           "sh", "-c", #"(echo "SUBSCRIBE prompts"; exec sleep 300) | exec socat - "$0""#, Self.socket]))
        try waitUntil("the user's agent is subscribed", timeout: 10, interval: 0.05) {
            let text = (try? sd.check(["cat", out]).stdout) ?? ""
            return (text.contains("\"ok\":true"), text)
        }
    }

    /// Firefox ESR's refused datagram (above) raised one prompt by its name for its user's agent; the user's answer
    /// lets the next Firefox ESR of theirs out, while another user's is still refused and awaits its own decision.
    private func checkAskedAndAnsweredForItsUidOnly(_ sd: RealSystemd, user: @escaping ([String]) -> [String]) throws {
        let socket = Self.socket
        var prompt: [String: Any] = [:]
        try waitUntil("one prompt for firefox-esr of uid \(Self.uid)", timeout: 10, interval: 0.05) {
            let r = try sd.check(["netpermctl", "--json", "prompts"])
            let ps = (try JSONValue.object(r.lines.last ?? "")["prompts"] as? [[String: Any]]) ?? []
            let mine = ps.filter { $0["app"] as? String == "firefox-esr" }
            prompt = mine.first ?? [:]
            return (mine.count == 1 && mine[0]["uid"] as? Int == Self.uid, "\(ps)")
        }
        XCTAssertEqual(prompt["name"] as? String, "Firefox ESR", "\(prompt)")
        let id = try XCTUnwrap(prompt["id"] as? Int, "\(prompt)")
        let answer = try sd.check(user(["sh", "-c", #"echo "ANSWER $1 allow" | socat -t 2 - "$0""#, socket, String(id)]))
        XCTAssertTrue(answer.stdout.contains("\"ok\":true"), answer.summary)

        // The connections that passed above left wwan0's peer (which never answers ARP) a failed neighbour, and a
        // connect to it would fail at once (EHOSTUNREACH) rather than be sent: forget it, in the test's namespace.
        try sd.check(["ip", "neigh", "flush", "dev", "wwan0"])
        let again = try runInScope(sd, unit: "app-gnome-firefox\\x2desr-4245.scope", user: user) { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (Self.allowedByTheRules(cgroup, table), table)
        }
        XCTAssertEqual(again.query["available"] as? Bool, true, "\(again.query)")
        let passed = try again.probe
        XCTAssertTrue(passed.passed, "the user's Firefox ESR after Allow: \(passed)\n\(again.output)")

        let other = 4031
        try sd.check(["useradd", "--uid", String(other), "--user-group", "--create-home", "--home-dir", "/home/npt-other",
                      "--shell", "/bin/sh", "npt-other"])
        addTeardownBlock { sd.stopUserManager(uid: other) }
        try sd.startUserManager(uid: other)
        let theirs = try runInScope(sd, unit: "app-gnome-firefox\\x2desr-4246.scope", uid: other, user: {
            sd.asUser(other, $0, environment: ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/npt-other",
                                               "XDG_RUNTIME_DIR=/run/user/\(other)",
                                               "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/\(other)/bus"])
        }) { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (RealSystemdUserRunTests.elements(of: "user5_wwan", in: table).contains("\"\(cgroup)\" : goto "), table)
        }
        XCTAssertEqual(theirs.query["app"] as? String, "firefox-esr", "\(theirs.query)")
        // Undecided for it, with no agent of its own to ask (the first uid's answer would say `user-decision`).
        XCTAssertEqual((theirs.query["sources"] as? [String: Any])?["wwan"] as? String, "no-agent", "\(theirs.query)")
        let still = try theirs.probe
        XCTAssertTrue(still.refused, "another uid's Firefox ESR after the first's Allow: \(still)\n\(theirs.output)")
    }

    /// The rules in force name the user's unit `cgroup` (the report's map of users' units: the daemon has loaded rules
    /// that know it) and take nothing away from it: a user's unit's allow is no element of its level's maps.
    private static func allowedByTheRules(_ cgroup: String, _ table: String) -> Bool {
        let named = RealSystemdUserRunTests.elements(of: "report_units", in: table)
        guard named.contains("\"\(cgroup)\""), let start = table.range(of: "map report_units {") else { return false }
        return !table.replacingCharacters(in: start.lowerBound..<table.endIndex, with: "").contains(cgroup)
            && !table[start.upperBound...].drop { $0 != "}" }.contains(cgroup)
    }

    /// A command in a scope of the user's own manager named `unit` (`systemd-run --user --scope --unit=`, as a
    /// desktop launches an app), held at its start until `ready(cgroup)` (HeldScope).
    private func runInScope(_ sd: RealSystemd, unit: String, uid: Int = uid, user: ([String]) -> [String],
                            probe: String = wwanProbe,
                            ready: (_ cgroup: String) throws -> (Bool, String)) throws -> HeldScope {
        let held = try HeldScope.run(self, sd, what: unit, probe: probe, launch: { script, probe in
            user(["systemd-run", "--user", "--scope", "--quiet", "--unit=" + unit, "sh", "-c", script, probe])
        }, ready: ready)
        XCTAssertEqual(held.cgroup, "user.slice/user-\(uid).slice/user@\(uid).service/app.slice/\(unit)")
        return held
    }

    /// The daemon's table and journal, shown when the test fails.
    private func showTableAndJournalOnFailure(_ sd: RealSystemd) {
        showOnFailure("nft list table inet netpermd") {
            (try? sd.run(["nft", "list", "table", "inet", "netpermd"]))?.stdout ?? "(nft failed)"
        }
        showOnFailure("netpermd's journal") {
            (try? sd.run(["journalctl", "--no-pager", "-o", "cat", "-u", "netpermd.service"]))?.stdout ?? ""
        }
    }
}
