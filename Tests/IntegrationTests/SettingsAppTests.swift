// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// netpermd-settings as a person meets it: under Xvfb, with a session bus and the accessibility bus of its own, driven
/// through its accessibility tree (Support/settings-driver.py, pyatspi), against the real daemon in a test namespace
/// with `Mode=block` and counting. What the window shows is checked against the daemon (QUERY, USAGE) and the kernel
/// (a real connection out of wwan0).
final class SettingsAppTests: IntegrationTestCase {
    static let user: UInt32 = 4050

    static let policy = """
        [Enforcement]
        Mode=block

        [Usage]
        Count=yes

        [Interface wlan*]
        Kind=wifi

        [Interface wwan*]
        Kind=wwan

        [App mail]
        User=4050
        WWAN=allow
        Roaming=deny

        [App backup]
        User=4051
        WWAN=deny

        """

    private var bed: EnforcementBed!
    fileprivate var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    private var display = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
        bed = try EnforcementBed(self)
        dir = try makeTempDir()
        XCTAssertEqual(chmod(dir, 0o755), 0)
        showOnFailure("the drivers' logs") {
            ["0", "\(Self.user)"].map { (try? String(contentsOfFile: self.dir + "/driver-\($0).log", encoding: .utf8)) ?? "" }
                .joined(separator: "\n---\n")
        }
        // An X server of the test's own; -ac: the users' apps may draw on it too.
        display = ":\(200 + getpid() % 500)"
        let x = try Subprocess.spawn(["Xvfb", display, "-ac", "-nolisten", "tcp", "-screen", "0", "1280x1024x24"],
                                     stdin: .devNull, stdout: .devNull, stderr: .appendFile(dir + "/xvfb.log"))
        addTeardownBlock { x.killAndReap() }
        try waitUntil("Xvfb listens", timeout: 10, interval: 0.05) {
            (FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(self.display.dropFirst())"), "")
        }
    }

    /// The settings app and its driver, as `uid` (nil: root), each command answered by one JSON line.
    final class Session {
        let child: ChildProcess
        let input: Int32
        let output: FileHandle
        var buffer = Data()

        init(_ test: SettingsAppTests, uid: UInt32?) throws {
            let driver = ["/usr/bin/python3", Repository.path("Tests/IntegrationTests/Support/settings-driver.py"), "serve",
                          Repository.path("settings/netpermd-settings")]
            var environment = ["DISPLAY=\(test.display)", "NETPERMD_SOCKET=\(test.socket)", "GSETTINGS_BACKEND=memory",
                               "LANG=C.UTF-8"]
            var argv = ["nsenter", "--net=/run/netns/\(test.bed.ns.name)"]
            let runtime: String
            if let uid {
                // A user with a passwd entry of the test's own (dbus-daemon resolves its uid), and a home.
                let users = try TestUsers(test, [("npt-settings", uid)])
                XCTAssertEqual(chmod(users.home(uid), 0o700), 0)
                runtime = users.home(uid)
                environment.append("XDG_RUNTIME_DIR=\(runtime)")
                argv += users.argv(uid, driver, environment: environment)
            } else {
                // In a pid namespace of its own, as TestUsers runs a user's: killing it ends its session bus, the
                // accessibility bus and the portals the bus started, whatever state the driver was left in.
                let home = try test.makeTempDir()
                runtime = home
                argv += ["unshare", "--pid", "--fork", "--kill-child", "env", "-i", "PATH=/usr/bin:/bin", "HOME=\(home)",
                         "XDG_RUNTIME_DIR=\(home)"] + environment + driver
            }
            let (inR, inW) = try Subprocess.makePipe()
            let (outR, outW) = try Subprocess.makePipe()
            child = try Subprocess.spawn(argv, stdin: .fd(inR), stdout: .fd(outW), stderr: .appendFile(test.dir + "/driver-\(uid ?? 0).log"))
            close(inR)
            close(outW)
            input = inW
            output = FileHandle(fileDescriptor: outR, closeOnDealloc: true)
            test.addTeardownBlock { [self] in
                close(self.input)
                self.child.killAndReap()
                // The document portal the session bus started mounted its FUSE file system in the runtime
                // directory; killed with the session, it leaves the mount behind (and the directory unremovable).
                _ = umount2(runtime + "/doc", Int32(MNT_DETACH))
            }
            let ready = try line(timeout: 30)
            guard ready["ready"] as? Bool == true else { throw HarnessError("the driver did not start: \(ready)") }
        }

        private func line(timeout: Double) throws -> [String: Any] {
            let end = Date().addingTimeInterval(timeout)
            while true {
                if let nl = buffer.firstIndex(of: 0x0A) {
                    let l = buffer[..<nl]
                    buffer = buffer[(nl + 1)...]
                    return try JSONValue.object(String(decoding: l, as: UTF8.self))
                }
                guard Date() < end else { throw HarnessError("the driver said nothing within \(timeout) s") }
                var p = pollfd(fd: output.fileDescriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 200) >= 0 else { continue }
                if p.revents != 0 {
                    let chunk = output.availableData
                    if chunk.isEmpty { throw HarnessError("the driver exited: \(child.poll().map { "\($0)" } ?? "?")") }
                    buffer += chunk
                }
            }
        }

        @discardableResult
        func ask(_ command: String) throws -> [String: Any] {
            let bytes = Array((command + "\n").utf8)
            guard write(input, bytes, bytes.count) == bytes.count else { throw HarnessError("write to the driver") }
            return try line(timeout: 30)
        }

        /// The Apps page's rows, by the app's name.
        func apps() throws -> [String: [String: Any]] {
            let rows = (try ask("apps")["apps"] as? [[String: Any]]) ?? []
            return Dictionary(rows.map { ($0["name"] as? String ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
        }
    }

    /// What the Data page says of a byte count, as the app writes it (text.size).
    static func size(_ n: Int) -> String {
        var v = Double(n)
        for unit in ["B", "kB", "MB", "GB", "TB"] {
            if v < 1000 || unit == "TB" { return unit == "B" ? String(format: "%.0f %@", v, unit) : String(format: "%.1f %@", v, unit) }
            v /= 1000
        }
        return ""
    }

    func testThePersonSeesAndChangesEveryAppAsTheDaemonAndTheKernelHaveIt() throws {
        try bed.addLink("wlan0", subnet: 81)
        try bed.addLink("wwan0", subnet: 82)
        // Default routes, as a phone has them: Wi-Fi first, cellular behind it.
        try bed.ns.ip("route", "add", "default", "via", "10.81.0.2", "metric", "100")
        try bed.ns.ip("route", "add", "default", "via", "10.82.0.2", "metric", "200")
        let share = dir + "/share/applications"
        try FileManager.default.createDirectory(atPath: share, withIntermediateDirectories: true)
        for (id, name) in [("org.example.Maps", "Maps"), ("org.example.Notes", "Notes")] {
            try "[Desktop Entry]\nType=Application\nName=\(name)\nIcon=\(id)\n"
                .write(toFile: share + "/\(id).desktop", atomically: true, encoding: .utf8)
        }
        // Maps running for uid 4050, as GNOME Shell starts it: a scope of the user's manager named for its ID.
        let top = try EnforcementBed.cgroupRoot() + "/npt-settings-\(getpid()).slice"
        let scope = top + "/user-4050.slice/user@4050.service/app.slice/app-gnome-org.example.Maps-1.scope"
        var made: [String] = []
        addTeardownBlock { EnforcementBed.removeCgroups(made.map { Array($0.utf8CString) }) }
        for d in [top, top + "/user-4050.slice", top + "/user-4050.slice/user@4050.service",
                  top + "/user-4050.slice/user@4050.service/app.slice", scope] {
            guard mkdir(d, 0o755) == 0 else { throw HarnessError("mkdir \(d): \(String(cString: strerror(errno)))") }
            made.append(d)
        }
        let config = try writeConfig(Self.policy, in: dir)
        func start() throws -> DaemonProcess {
            let d = try startDaemon(in: bed.ns, socket: socket, config: config, wrapper: ["env", "XDG_DATA_DIRS=\(dir)/share"],
                                    nsenter: true)
            try waitForEnforcing(socket)
            return d
        }
        var daemon = try start()
        XCTAssertEqual(chmod(socket, 0o666), 0)
        try waitUntil("the peers answer") {
            let p = try self.bed.probe(link: "wlan0"), q = try self.bed.probe(link: "wwan0")
            return (p.passed && q.passed, "\(p) \(q)")
        }
        func inMaps() throws -> EnforcementBed.Probe { try bed.probe(uid: Self.user, cgroup: scope, link: "wwan0") }

        // The user: their own apps only (the policy's of their uid, the desktop app they run, the one installed for
        // everyone), by name.
        let user = try Session(self, uid: Self.user)
        var rows: [String: [String: Any]] = [:]
        try waitUntil("the user's apps are listed", timeout: 10, interval: 0.1) {
            rows = try user.apps()
            return (Set(rows.keys) == ["mail", "Maps", "Notes"], "\(rows.keys.sorted())")
        }
        XCTAssertEqual(rows["Maps"]?["choice"] as? String, "Wi-Fi only", "WWAN=ask by [Defaults], undecided: \(rows)")
        XCTAssertEqual((rows["Maps"]?["sensitive"] as? [String: Bool])?["Off"], false,
                       "[Defaults] WiFi=allow is the policy's: Off cannot be chosen here")
        XCTAssertEqual((rows["mail"]?["sensitive"] as? [String: Bool])?["Wi-Fi only"], false, "mail's WWAN=allow is the policy's")
        XCTAssertEqual(rows["mail"]?["roaming"] as? Bool, false, "mail's Roaming=deny: its roaming switch is off")
        XCTAssertEqual(rows["Maps"]?["roaming"] as? Bool, true, "[Defaults] Roaming=allow")

        // "Wi-Fi & Cellular", then "Wi-Fi only" for Maps: that uid's Maps is allowed, then denied, on wwan, in the
        // daemon and in the kernel.
        try user.ask("choose Maps Wi-Fi & Cellular")
        try waitUntil("the user's own decision is stored", timeout: 10, interval: 0.05) {
            let q = try self.request(self.socket, "QUERY org.example.Maps")
            let own = (q["user_decisions"] as? [[String: Any]])?.first
            return (own?["decision"] as? String == "allow" && own?["for_uid"] as? Int == Int(Self.user), "\(q)")
        }
        try waitUntil("Maps passes out of wwan0", timeout: 10, interval: 0.05) {
            let p = try inMaps()
            return (p.passed, "\(p)")
        }
        try user.ask("choose Maps Wi-Fi only")
        try waitUntil("the row says Wi-Fi only", timeout: 10, interval: 0.05) {
            let row = try user.apps()["Maps"]
            return (row?["choice"] as? String == "Wi-Fi only", "\(row ?? [:])")
        }
        let own = (try request(socket, "QUERY org.example.Maps")["user_decisions"] as? [[String: Any]])?.first
        XCTAssertEqual(own?["decision"] as? String, "deny", "\(own ?? [:])")
        let refused = try inMaps()
        XCTAssertTrue(refused.blocked, "uid 4050's Maps out of wwan0: \(refused)")
        XCTAssertTrue(try bed.probe(uid: Self.user, cgroup: scope, link: "wlan0").passed, "and still on Wi-Fi")
        XCTAssertTrue(try bed.probe(uid: Self.user, link: "wwan0").passed, "uid 4050 outside Maps is mail, allowed")

        // The Data page: the bytes USAGE reports after that real traffic, with a bar.
        _ = try user.ask("page Data")
        try waitUntil("the Data page shows what USAGE says", timeout: 10, interval: 0.1) {
            let usage = try self.request(self.socket, "USAGE mail")
            let cur = ((usage["apps"] as? [[String: Any]])?.first?["current"] as? [String: Any]) ?? [:]
            let sent = cur["sent_bytes"] as? Int ?? -1, received = cur["received_bytes"] as? Int ?? -1
            let data = try user.ask("data")
            let row = (data["rows"] as? [[String: Any]])?.first { $0["title"] as? String == "mail" }
            let want = "\(Self.size(sent)) sent, \(Self.size(received)) received"
            return (sent > 0 && (row?["subtitle"] as? String)?.hasPrefix(want) == true && row?["bar"] != nil,
                    "want \(want): \(data)")
        }

        // The daemon stopped: the window says so; started again: it comes back.
        stopDaemon(daemon)
        try waitUntil("the window says netpermd is gone", timeout: 10, interval: 0.1) {
            let s = try user.ask("status")
            return (s["shown"] as? Bool == true, "\(s)")
        }
        daemon = try start()
        XCTAssertEqual(chmod(socket, 0o666), 0)
        try waitUntil("the window is back", timeout: 10, interval: 0.1) {
            let s = try user.ask("status")
            _ = try user.ask("page Apps")
            let listed = try user.apps().keys.contains("Maps")
            return (s["shown"] as? Bool == false && listed, "\(s)")
        }

        // Root: every app; a prompt answered in the window; a verdict changed elsewhere shows within a second.
        let root = try Session(self, uid: nil)
        try waitUntil("root sees every app", timeout: 10, interval: 0.1) {
            rows = try root.apps()
            return (Set(rows.keys) == ["mail", "backup", "Maps", "Notes"], "\(rows.keys.sorted())")
        }
        XCTAssertEqual((rows["backup"]?["sensitive"] as? [String: Bool])?["Wi-Fi & Cellular"], false,
                       "backup's WWAN=deny is the policy's: \(rows["backup"] ?? [:])")
        // uid 4050's Maps undecided again, and refused out of wwan0: the kernel's prompt, for that uid.
        _ = try root.ask("page Waiting")
        try request(socket, "FORGET org.example.Maps")
        XCTAssertTrue(try inMaps().blocked)
        var prompts: [[String: Any]] = []
        try waitUntil("the prompt is in the window", timeout: 10, interval: 0.1) {
            prompts = (try root.ask("prompts")["rows"] as? [[String: Any]]) ?? []
            return (prompts.contains { ($0["title"] as? String)?.hasPrefix("Allow “Maps” to use cellular") == true },
                    "\(prompts)")
        }
        let buttons = prompts.first?["buttons"] as? [String] ?? []
        XCTAssertEqual(buttons, ["Allow for Maps", "Wi-Fi only for Maps", "Allow once for Maps"], "\(prompts)")
        try root.ask("press Allow for Maps")
        try waitUntil("the prompt is answered, for uid 4050", timeout: 10, interval: 0.05) {
            let q = try self.request(self.socket, "QUERY org.example.Maps")
            let own = (q["user_decisions"] as? [[String: Any]])?.first
            return (own?["decision"] as? String == "allow" && own?["for_uid"] as? Int == Int(Self.user), "\(q)")
        }
        try waitUntil("answered Allow: Maps passes out of wwan0", timeout: 10, interval: 0.05) {
            let p = try inMaps()
            return (p.passed, "\(p)")
        }

        // Decided elsewhere: the window follows within a second of the daemon's reply (the tree read to its end by
        // then: the driver's own reading counts against the window).
        _ = try root.ask("page Apps")
        func monotonic() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }
        XCTAssertEqual(try root.ask("choice Maps")["choice"] as? String, "Wi-Fi only", "everyone's Maps is still asked")
        try request(socket, "DECIDE org.example.Maps wwan allow")
        let decided = monotonic()
        var seenAt = Double.infinity
        try waitUntil("the window shows the change", timeout: 5, interval: 0.01) {
            let reply = try root.ask("choice Maps")
            if reply["choice"] as? String == "Wi-Fi & Cellular" { seenAt = reply["read_at"] as? Double ?? .infinity }
            return (seenAt.isFinite, "\(reply)")
        }
        XCTAssertLessThan(seenAt - decided, 1, "from the daemon's change to the window's")

        // The screenshots README shows, at a phone's width and a laptop's.
        let shots = Repository.path(".build/screenshots")
        try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
        for (name, size) in [("settings-phone.png", "360x720"), ("settings-laptop.png", "1000x720")] {
            // A session bus of its own that ends with it (without one GIO would autolaunch one that outlives it), and
            // a home and runtime directory of its own: the document portal that bus starts mounts one there (under
            // root's own ~/.cache it stayed mounted after every run).
            let runtime = try makeTempDir()
            // Detached even when the run fails, before the directory's own removal (teardown blocks run last first).
            addTeardownBlock { _ = umount2(runtime + "/doc", Int32(MNT_DETACH)) }
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "unshare", "--pid", "--fork",
                                        "--kill-child", "env", "DISPLAY=\(display)", "NETPERMD_SOCKET=\(socket)",
                                        "HOME=\(runtime)", "XDG_RUNTIME_DIR=\(runtime)",
                                        "GSETTINGS_BACKEND=memory", "NO_AT_BRIDGE=1", "dbus-run-session", "--",
                                        Repository.path("settings/netpermd-settings"), "--screenshot", shots + "/" + name,
                                        "--size", size], timeout: 30)
            XCTAssertEqual(r.status, 0, r.summary)
            let png = try Data(contentsOf: URL(fileURLWithPath: shots + "/" + name))
            XCTAssertEqual(Array(png.prefix(4)), [0x89, 0x50, 0x4E, 0x47], "\(name) is a PNG")
        }
    }

    /// The desktop file and the AppStream metainfo validate; every string the app shows goes through gettext.
    func testTheFilesValidateAndTheStringsAreReadyForTranslation() throws {
        let data = Repository.path("settings/data")
        let desktop = try Subprocess.run(["desktop-file-validate", data + "/org.netpermd.Settings.desktop"])
        XCTAssertEqual(desktop.status, 0, desktop.summary)
        XCTAssertEqual(desktop.stdout + desktop.stderr, "", desktop.summary)
        let meta = try Subprocess.run(["appstreamcli", "validate", "--no-net", data + "/org.netpermd.Settings.metainfo.xml"])
        XCTAssertEqual(meta.status, 0, meta.summary)
        let pot = try makeTempDir() + "/netpermd-settings.pot"
        let modules = try FileManager.default.contentsOfDirectory(atPath: Repository.path("settings/netpermd_settings"))
            .filter { $0.hasSuffix(".py") }.map { Repository.path("settings/netpermd_settings/" + $0) }
        let x = try Subprocess.run(["xgettext", "--language=Python", "--keyword=_", "--from-code=UTF-8", "--output=" + pot] + modules)
        XCTAssertEqual(x.status, 0, x.summary)
        let text = try String(contentsOfFile: pot, encoding: .utf8)
        for msgid in ["Wi-Fi only", "Wi-Fi & Cellular", "Off", "Metered networks", "Waiting for your answer",
                      "Data used by each app", "Allow “{app}” to use {kinds}?"] {
            XCTAssertTrue(text.contains("msgid \"\(msgid)\""), "\(msgid) is not translatable")
        }
    }
}
