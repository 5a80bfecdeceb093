// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Apps known by what they run (docs/APPS.md; issue 47's rule 2), end to end: a real user manager (HostUserManager)
/// with Debian's session bus, the kernel's exec events, the daemon's scope made through that manager, and the kernel's
/// rules. Each app (Support/exec-app.py) starts where a desktop without units per app starts it, waits until it is in
/// its scope and its QUERY says the rules name it, then sends a datagram over wwan every 50 ms: `[Defaults] WWAN=ask`
/// and `Mode=block` refuse it, one prompt with its name is raised, the person's answer lets it out, for that uid only:
/// another uid's same app is still refused and asked.
final class ExecAppTests: IntegrationTestCase {
    private var bed: EnforcementBed!
    private var dir = ""
    private var apps = ""
    private var socket: String { dir + "/netpermd.sock" }
    private var daemon: DaemonProcess!
    private var manager: HostUserManager!
    private var uid: UInt32 = 0

    private static let policy = """
        [Enforcement]
        Mode=block

        [Interface wwan*]
        Kind=wwan

        [Defaults]
        WWAN=ask

        """

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
    }

    /// The test's links, its installed apps (programs root alone can write, in a directory of the test's own below
    /// /run), the daemon hearing the kernel's exec events, and a user manager of a uid of the test's own.
    private func start() throws {
        bed = try EnforcementBed(self)
        try bed.addLink("wwan0", subnet: 76)
        dir = try makeTempDir()
        chmod(dir, 0o755)
        uid = 47_000 + UInt32(getpid() % 1000)
        apps = try makeRunDirectory()
        let bin = apps + "/bin"
        mkdir(bin, 0o755)
        try FileManager.default.copyItem(atPath: Repository.path("Tests/IntegrationTests/Support/exec-app.py"),
                                         toPath: bin + "/npt-maps")
        try FileManager.default.copyItem(atPath: "/usr/bin/python3.11", toPath: bin + "/npt-geary")
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: bin + "/npt-term")
        for p in ["npt-maps", "npt-geary", "npt-term"] { chmod(bin + "/" + p, 0o755) }
        let results = dir + "/results"
        mkdir(results, 0o777)
        chmod(results, 0o777)
        let peer = bed.peers["wwan0"]!.v4
        let args = "\(results)/maps.dbus \(peer) \(EnforcementBed.port) \(socket)"
        try write("""
            [Desktop Entry]
            Type=Application
            Name=Test Maps
            Name[de]=Testkarten
            DBusActivatable=true
            Exec=\(bin)/npt-maps %U

            """, to: "share/applications/org.npt.Maps.desktop")
        try write("[D-BUS Service]\nName=org.npt.Maps\nExec=\(bin)/npt-maps \(args)\n",
                  to: "share/dbus-1/services/org.npt.Maps.service")
        try write("[Desktop Entry]\nType=Application\nName=Test Geary\nExec=\(bin)/npt-geary %U\n",
                  to: "share/applications/npt-geary.desktop")
        try write("[Desktop Entry]\nType=Application\nName=Test Terminal\nExec=\(bin)/npt-term\n",
                  to: "share/applications/org.npt.Term.desktop")
        // As snapd installs a snap's entry (in /var/lib/snapd/desktop, read like any data directory).
        try write("[Desktop Entry]\nType=Application\nName=Test Snap\nExec=\(bin)/npt-term\n",
                  to: "share/applications/npt-snap_npt-snap.desktop")
        let config = try writeConfig(Self.policy, in: dir)
        daemon = try startDaemon(in: bed.ns, socket: socket, config: config,
                                 extraArgs: ["--process-events-netns", "/proc/\(getpid())/ns/net"],
                                 wrapper: ["env", "XDG_DATA_DIRS=\(apps)/share"], nsenter: true)
        showOnFailure("netpermd's log") { [daemon] in daemon?.logTail ?? "" }
        try waitForEnforcing(socket)
        XCTAssertFalse(daemon.log.contains("process events: not heard"), "the daemon hears the kernel's exec events")
        manager = try HostUserManager(self, netns: bed.ns.name, uid: uid)
        // dbus-daemon reads its service files from the manager's environment, set before the bus first starts.
        let env = try Subprocess.run(manager.asUser(["systemctl", "--user", "set-environment",
                                                     "XDG_DATA_DIRS=\(apps)/share:/usr/share"]))
        guard env.status == 0 else { throw HarnessError(env.summary) }
        try listenForPrompts()
    }

    /// The person's agent: a subscriber of the uid's prompts (without one the daemon asks nobody), until teardown.
    private func listenForPrompts() throws {
        let out = dir + "/agent.out"
        let p = try Subprocess.spawn(manager.asUser(["sh", "-c", #"(echo "SUBSCRIBE prompts"; exec sleep 120) | exec socat - "UNIX-CONNECT:$0""#,
                                                     socket]), stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(out),
                                     ownGroup: true)
        addTeardownBlock { _ = p.killAndReap() }
        try waitUntil("the uid's agent is subscribed") {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            return (text.contains("\"ok\":true"), text)
        }
    }

    /// A directory of the test's own below /run (root's, 0755 all the way up): the daemon takes an everyone's entry's
    /// program only where root alone can write it and every directory above it (the test's temporary directory may
    /// be below /tmp, which everyone writes).
    private func makeRunDirectory() throws -> String {
        var template = Array("/run/npt-apps-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))") }
        let path = String(cString: p)
        chmod(path, 0o755)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    private func write(_ text: String, to relative: String) throws {
        let path = apps + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
    }

    /// Runs `argv` as the test uid in `cgroup` (below the manager's), in the test's namespace, until teardown.
    private func startIn(_ cgroup: String, _ argv: [String]) throws {
        let p = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(bed.ns.name)", "sh", "-c",
                                      #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup]
                                     + manager.asUser(argv), stdin: .devNull, stdout: .devNull, stderr: .devNull)
        addTeardownBlock { _ = p.killAndReap() }
    }

    /// The lines the app wrote to `result`, once `done` holds of them (at most `timeout` seconds).
    @discardableResult
    private func lines(_ result: String, timeout: Double = 10, until done: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
        var got: [[String: Any]] = []
        try waitUntil("\(result) says what was awaited", timeout: timeout, interval: 0.02) {
            let text = (try? String(contentsOfFile: result, encoding: .utf8)) ?? ""
            got = text.split(separator: "\n").compactMap { try? JSONValue.object(String($0)) }
            return (done(got), text)
        }
        return got
    }

    private func states(_ l: [[String: Any]]) -> [String] { l.compactMap { $0["state"] as? String } }

    /// The user's own request, as that uid.
    private func asUser(_ line: String) throws -> [String: Any] {
        let r = try Subprocess.run(manager.asUser(["socat", "-t", "2", "-", "UNIX-CONNECT:" + socket]),
                                   input: Array((line + "\n").utf8))
        guard r.status == 0, let first = r.stdout.split(separator: "\n").first else { throw HarnessError(r.summary) }
        return try JSONValue.object(String(first))
    }

    /// The app's result: in its scope, named by its installed entry, refused over wwan, one prompt with its name (and
    /// its `names`, in German for a German person) for the test uid; the user's answer lets its datagrams out, and
    /// that uid's alone; APPS lists it for the user. Its pid.
    @discardableResult
    private func checkFoundAndHeld(_ result: String, app: String, name: String, unit known: String? = nil,
                                   names: [String: String] = [:], otherUnit: String? = nil) throws -> Int {
        let first = try lines(result) { self.states($0).contains("refused") || self.states($0).contains("passed")
            || self.states($0).contains(where: { $0.hasPrefix("never") }) }
        XCTAssertEqual(states(first).prefix(2), ["query", "refused"], "\(first)")
        guard let q = first.first?["query"] as? [String: Any], let cgroup = first.first?["cgroup"] as? String,
              let pid = first.first?["pid"] as? Int else { XCTFail("\(first)"); return 0 }
        let unit = known ?? "app-netpermd-" + app.replacingOccurrences(of: "-", with: "\\x2d") + "-\(pid).scope"
        XCTAssertTrue(cgroup.hasSuffix("/user@\(uid).service/app.slice/" + unit), cgroup)
        XCTAssertEqual(q["app"] as? String, app, "\(q)")
        XCTAssertEqual(q["matched_by"] as? String, "desktop", "\(q)")
        XCTAssertEqual(q["name"] as? String, name, "\(q)")
        XCTAssertEqual(q["enforced"] as? Bool, true, "\(q)")

        var prompt: [String: Any] = [:]
        try waitUntil("one prompt for \(app) of uid \(uid)") {
            let ps = (try self.request(self.socket, "PROMPTS")["prompts"] as? [[String: Any]]) ?? []
            let mine = ps.filter { $0["app"] as? String == app }
            prompt = mine.first ?? [:]
            return (mine.count == 1 && mine[0]["uid"] as? Int == Int(self.uid), "\(ps)")
        }
        XCTAssertEqual(prompt["name"] as? String, name, "\(prompt)")
        XCTAssertEqual(prompt["names"] as? [String: String] ?? [:], names, "\(prompt)")
        let listed = ((try asUser("APPS")["apps"] as? [[String: Any]]) ?? []).compactMap { $0["app"] as? String }
        XCTAssertTrue(listed.contains(app), "APPS of uid \(uid): \(listed)")
        if let german = names["de"] {
            let r = try Subprocess.run(manager.asUser([netpermctl, "--socket", socket, "apps"],
                                                      environment: ["LANG=de_DE.UTF-8"]))
            XCTAssertTrue(r.stdout.contains("\(app) (\(german))"), "netpermctl apps of a German person: \(r.summary)")
        }
        guard let id = prompt["id"] else { XCTFail("no id: \(prompt)"); return pid }
        let answer = try asUser("ANSWER \(id) allow")
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
        try lines(result) { self.states($0).suffix(1) == ["passed"] }
        XCTAssertEqual(try asUser("DECISIONS").description.contains(app), true)
        try checkAnotherUidIsStillAsked(app, unit: otherUnit)
        return pid
    }

    /// After the test uid's answer, the same app of another uid (its own manager's tree beside the test uid's, as
    /// the launcher of its desktop makes it: `app-gnome-ID-N.scope`) is still refused and awaits its own decision:
    /// the answer holds for the uid that gave it. (Were it everyone's, this app's datagram would pass: the other uid
    /// is named by no app.)
    private func checkAnotherUidIsStillAsked(_ app: String, unit: String?) throws {
        let other = uid + 1
        let top = ((manager.cgroup as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let escaped = app.replacingOccurrences(of: "-", with: "\\x2d")
        let cgroup = top + "/user-\(other).slice/user@\(other).service/app.slice/"
            + (unit ?? "app-gnome-\(escaped)-\(getpid()).scope")
        try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: true)
        let result = dir + "/results/\(app).uid\(other)"
        let p = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(bed.ns.name)", "sh", "-c",
                                      #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup,
                                      "setpriv", "--reuid=\(other)", "--regid=\(other)", "--clear-groups",
                                      "/usr/bin/python3", Repository.path("Tests/IntegrationTests/Support/exec-app.py"),
                                      result, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket, "--stay"],
                                     stdin: .devNull, stdout: .devNull, stderr: .devNull)
        defer { _ = p.killAndReap() }
        let l = try lines(result) { self.states($0).contains("refused") || self.states($0).contains("passed")
            || self.states($0).contains(where: { $0.hasPrefix("never") }) }
        XCTAssertEqual(states(l).prefix(2), ["query", "refused"], "uid \(other)'s \(app) after uid \(uid)'s answer: \(l)")
        let q = l.first?["query"] as? [String: Any] ?? [:]
        XCTAssertEqual(q["app"] as? String, app, "\(q)")
        // Still to be asked: its `ask` is undecided for it, and it has no agent to ask (the test uid's answer would
        // say `user-decision`, and everyone's `decision`).
        XCTAssertEqual((q["sources"] as? [String: Any])?["wwan"] as? String, "no-agent", "uid \(other)'s \(app): \(q)")
    }

    /// A `DBusActivatable=true` app activated over the session bus: Debian 12's dbus-daemon forks it in
    /// `session.slice/dbus.service` (its service file names no `SystemdService=`), where only its program says what it
    /// is: a script (`#!/usr/bin/python3`, as Maps is `#!/usr/bin/gjs -m`).
    func testADBusActivatedAppGetsAScopeAndIsAskedAndHeld() throws {
        try start()
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)"]
            + manager.asUser(["dbus-send", "--session", "--dest=org.npt.Maps", "/", "org.npt.Maps.Start"]))
        XCTAssertEqual(r.status, 0, r.summary)
        let pid = try checkFoundAndHeld(dir + "/results/maps.dbus", app: "org.npt.Maps", name: "Test Maps",
                                        names: ["de": "Testkarten"])
        // Where dbus-daemon forked it, as the daemon read it from /proc/PID/cgroup before it asked for the scope.
        XCTAssertTrue(daemon.log.contains("desktop apps: pid \(pid) of uid \(uid) runs org.npt.Maps (activated by "
            + "dbus-daemon): giving it app-netpermd-org.npt.Maps-\(pid).scope"), "first in session.slice/dbus.service")
    }

    /// A desktop that makes no unit per app starts it from a process of its session (`session.slice`): the app is
    /// a binary whose desktop ID is not reverse-DNS (`npt-geary`, as Debian's `firefox-esr`).
    func testAnAppStartedByTheSessionGetsAScopeAndIsAskedAndHeld() throws {
        try start()
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let result = dir + "/results/geary"
        try startIn(shell, [apps + "/bin/npt-geary", Repository.path("Tests/IntegrationTests/Support/exec-app.py"),
                            result, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket])
        try checkFoundAndHeld(result, app: "npt-geary", name: "Test Geary")
    }

    /// The daemon keeps one connection to the user's manager for the scopes it has it make (a new one per scope cost
    /// the manager an accept, an authentication and a teardown: BENCHMARKS.md figure 23), and reads it: the manager
    /// sends every connection to its private socket every unit's changes, which must not pile up in the socket or in
    /// the manager. A manager that drops the connection (here it re-executes itself, as after an upgrade) is
    /// connected to again for the next app.
    func testTheDaemonKeepsOneConnectionToTheUsersManagerReadsItAndConnectsAgain() throws {
        try start()
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let script = Repository.path("Tests/IntegrationTests/Support/exec-app.py")
        for name in ["first", "second"] {
            let result = dir + "/results/" + name
            try startIn(shell, [apps + "/bin/npt-geary", script, result, bed.peers["wwan0"]!.v4, EnforcementBed.port,
                                socket])
            let l = try lines(result) { self.states($0).contains("refused") }
            XCTAssertTrue((l.first?["cgroup"] as? String ?? "").contains("/app.slice/app-netpermd-npt\\x2dgeary-"), "\(l)")
        }
        var kept: [UInt64: Int] = [:]
        try waitUntil("one connection of the daemon's to the manager's private socket") {
            kept = try self.connectionsToManager()
            return (kept.count == 1, "\(kept)")
        }
        try churnUnits(from: shell)
        try waitUntil("the daemon has read what the manager sent") {
            let now = try self.connectionsToManager()
            return (now.keys.sorted() == kept.keys.sorted() && now.values.allSatisfy { $0 == 0 }, "\(now) (before: \(kept))")
        }
        let r = try Subprocess.run(manager.asUser(["systemctl", "--user", "daemon-reexec"]))
        XCTAssertEqual(r.status, 0, r.summary)
        let third = dir + "/results/third"
        try startIn(shell, [apps + "/bin/npt-geary", script, third, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket])
        let l = try lines(third) { self.states($0).contains("refused") }
        XCTAssertTrue((l.first?["cgroup"] as? String ?? "").contains("/app.slice/app-netpermd-npt\\x2dgeary-"), "\(l)")
        try waitUntil("one new connection of the daemon's to the manager") {
            let now = try self.connectionsToManager()
            return (now.count == 1 && Set(now.keys).isDisjoint(with: kept.keys), "\(now) (before: \(kept))")
        }
    }

    /// Some hundred signals of the manager to every connection to its private socket: units started and stopped
    /// (scopes, made as the snap's below, from a cgroup of the manager's tree).
    private func churnUnits(from cgroup: String) throws {
        for i in 0..<20 {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "sh", "-c",
                                        #"echo $$ > "$0/cgroup.procs" && exec "$@""#, cgroup] + manager.asUser(
                ["systemd-run", "--user", "--scope", "--quiet", "--unit=npt-churn-\(i).scope", "true"]))
            XCTAssertEqual(r.status, 0, r.summary)
        }
    }

    /// A user whose manager is gone (it exited; its tree is still there): the app's scope cannot be made, the daemon
    /// says so and keeps running, and the app stays where it runs.
    func testAnAppWhoseManagerIsGoneStaysWhereItRuns() throws {
        try start()
        let r = try Subprocess.run(manager.asUser(["systemctl", "--user", "exit"]))
        XCTAssertEqual(r.status, 0, r.summary)
        try waitUntil("the manager is gone") {
            let s = try Subprocess.run(self.manager.asUser(["systemctl", "--user", "is-system-running"]))
            return (s.status != 0 && !s.stdout.contains("stopping"), s.summary)
        }
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let result = dir + "/results/geary"
        try startIn(shell, [apps + "/bin/npt-geary", Repository.path("Tests/IntegrationTests/Support/exec-app.py"),
                            result, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket, "--stay"])
        try waitUntil("the daemon says the scope was not made") {
            (self.daemon.log.contains("desktop apps: no scope for pid"), String(self.daemon.log.suffix(2000)))
        }
        XCTAssertNil(daemon.pollExit(), "the daemon runs on")
        let l = try lines(result) { self.states($0).contains("refused") || self.states($0).contains("passed") }
        XCTAssertTrue(shell.hasSuffix(l.first?["cgroup"] as? String ?? "-"), "stays where it runs: \(l)")
    }

    /// The sockets of process `pid` (the daemon's by default) connected to the manager's private socket, each with the
    /// bytes waiting in it (ss: the manager's end of each connection names the socket's path and its peer's inode).
    private func connectionsToManager(of pid: pid_t? = nil) throws -> [UInt64: Int] {
        let pid = pid ?? daemon.pid
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "ss", "-xan"])
        guard r.status == 0 else { throw HarnessError(r.summary) }
        let rows = r.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        let path = manager.runtime + "/systemd/private"
        // u_str ESTAB RECV-Q SEND-Q LOCAL INODE PEER PEER-INODE
        let peers = Set(rows.filter { $0.count >= 8 && $0[4] == path }.compactMap { UInt64($0[7]) })
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        let mine = Set(fds.compactMap { fd -> UInt64? in
            guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/" + fd),
                  link.hasPrefix("socket:[") else { return nil }
            return UInt64(link.dropFirst(8).dropLast())
        })
        var out: [UInt64: Int] = [:]
        for row in rows where row.count >= 8 {
            if let inode = UInt64(row[5]), peers.contains(inode), mine.contains(inode) { out[inode] = Int(row[2]) ?? -1 }
        }
        return out
    }

    /// Under the shipped unit the daemon cannot reach a user's manager (docs/APPS.md): the user's own `netpermctl
    /// scopes`, a unit of that manager as netpermd-scopes.service is, makes the scope when the daemon asks it, over a
    /// connection to the manager it keeps and reads.
    func testTheUsersOwnNetpermctlScopesMakesTheScope() throws {
        try start()
        try startScopes()
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let result = dir + "/results/geary"
        try startIn(shell, [apps + "/bin/npt-geary", Repository.path("Tests/IntegrationTests/Support/exec-app.py"),
                            result, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket])
        try checkFoundAndHeld(result, app: "npt-geary", name: "Test Geary")
        // Counted once its SCOPE answer is read, which may come after the app saw itself in its scope.
        try waitUntil("the scope counted as made by the user's netpermctl scopes") {
            let metrics = try self.request(self.socket, "METRICS")["metrics"] as? String ?? ""
            return (metrics.contains("netpermd_process_exec_scopes_by_users_total 1\n")
                    && metrics.contains("netpermd_process_exec_scopes_total{outcome=\"made\"} 1\n"),
                    metrics.split(separator: "\n").filter { $0.hasPrefix("netpermd_process_") }.joined(separator: "\n"))
        }
        // It keeps its connection to the manager for the next scope, and reads what the manager sends meanwhile.
        let main = try Subprocess.run(manager.asUser(["systemctl", "--user", "show", "--property=MainPID", "--value",
                                                      "npt-scopes.service"]))
        guard let pid = pid_t(main.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else {
            return XCTFail(main.summary)
        }
        var kept: [UInt64: Int] = [:]
        try waitUntil("one connection of netpermctl scopes' to the manager's private socket") {
            kept = try self.connectionsToManager(of: pid)
            return (kept.count == 1, "\(kept)")
        }
        try churnUnits(from: shell)
        try waitUntil("netpermctl scopes has read what the manager sent") {
            let now = try self.connectionsToManager(of: pid)
            return (now.keys.sorted() == kept.keys.sorted() && now.values.allSatisfy { $0 == 0 }, "\(now) (before: \(kept))")
        }
    }

    /// The user's `netpermctl scopes`, as netpermd-scopes.service runs it: a unit of the user's manager.
    private func startScopes() throws {
        let log = dir + "/results/scopes.log"
        let r = try Subprocess.run(manager.asUser(["systemd-run", "--user", "--quiet", "--unit=npt-scopes.service",
                                                   "-p", "StandardError=file:" + log, netpermctl, "--socket", socket,
                                                   "scopes"]))
        XCTAssertEqual(r.status, 0, r.summary)
        showOnFailure("netpermctl scopes") { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        try waitUntil("netpermctl scopes is subscribed") {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return (text.contains("making the scopes"), text)
        }
    }

    /// An app is also what owns its ID on the session bus (GApplication owns it, whatever program runs it): the
    /// user's `netpermctl scopes` tells the daemon who owns which name, and a process of a session place that owns
    /// an installed app's name is that app, given its scope, asked and held. A name no installed app has changes
    /// nothing.
    func testAProcessOwningAnAppsNameOnTheSessionBusIsThatApp() throws {
        try start()
        try write("[Desktop Entry]\nType=Application\nName=Test Owner\nExec=\(apps)/bin/npt-term\n",
                  to: "share/applications/org.npt.Owner.desktop")
        try waitUntil("the daemon lists org.npt.Owner") {
            let listed = ((try self.request(self.socket, "APPS")["apps"] as? [[String: Any]]) ?? [])
                .compactMap { $0["app"] as? String }
            return (listed.contains("org.npt.Owner"), "\(listed)")
        }
        try startScopes()
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let script = Repository.path("Tests/IntegrationTests/Support/exec-app.py")
        let result = dir + "/results/owner"
        try startIn(shell, ["/usr/bin/python3", script, result, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket,
                            "--own", "org.npt.Owner"])
        try checkFoundAndHeld(result, app: "org.npt.Owner", name: "Test Owner")
        let other = dir + "/results/not-an-app"
        try startIn(shell, ["/usr/bin/python3", script, other, bed.peers["wwan0"]!.v4, EnforcementBed.port, socket,
                            "--stay", "--own", "org.npt.NotInstalled"])
        let l = try lines(other) { self.states($0).contains("refused") || self.states($0).contains("passed") }
        XCTAssertTrue(shell.hasSuffix(l.first?["cgroup"] as? String ?? "-"), "no app, stays where it runs: \(l)")
        XCTAssertEqual((l.first?["query"] as? [String: Any])?["matched_by"] as? String, "default", "\(l)")
    }

    /// Snap's scope (`snap.SNAP.APP.UUID.scope`, as snapd's launcher asks the user's manager for it) is the snap's
    /// installed entry `SNAP_APP`, a desktop ID that is not reverse-DNS: named, refused, asked and held.
    func testASnapsScopeIsItsInstalledApp() throws {
        try start()
        let shell = try manager.makeCgroup("session.slice/npt-shell.service")
        let unit = "snap.npt-snap.npt-snap.0b2c6a1e-1a2b-4c3d-8e9f-a0b1c2d3e4f5.scope"
        let result = dir + "/results/snap"
        try startIn(shell, ["systemd-run", "--user", "--scope", "--quiet", "--unit=" + unit, "/usr/bin/python3",
                            Repository.path("Tests/IntegrationTests/Support/exec-app.py"), result,
                            bed.peers["wwan0"]!.v4, EnforcementBed.port, socket, "--stay"])
        try checkFoundAndHeld(result, app: "npt-snap_npt-snap", name: "Test Snap", unit: unit,
                              otherUnit: "snap.npt-snap.npt-snap.1c3d5e7f-2b4c-4d6e-8f0a-b1c2d3e4f5a6.scope")
    }

    /// A terminal's command: an installed app typed in the terminal is that app, in a scope of its own; any other
    /// command stays the terminal's (in the answer as in the kernel: refused as the terminal is, undecided); a user's
    /// own copy of an installed app's program, a link to that copy and a script of theirs named like an app's are other
    /// files, no app; a process in a sub-cgroup of an app's unit is that app.
    func testATerminalsCommandsAreTheAppTheyRunOrTheTerminals() throws {
        try start()
        let vte = try manager.makeCgroup("app.slice/app-org.npt.Term.slice/vte-spawn-1.scope")
        let maps = dir + "/results/maps.vte"
        let peer = bed.peers["wwan0"]!.v4
        try startIn(vte, [apps + "/bin/npt-maps", maps, peer, EnforcementBed.port, socket])
        try checkFoundAndHeld(maps, app: "org.npt.Maps", name: "Test Maps", names: ["de": "Testkarten"])

        let script = Repository.path("Tests/IntegrationTests/Support/exec-app.py")
        let other = dir + "/results/other"
        try startIn(vte, ["/usr/bin/python3", script, other, peer, EnforcementBed.port, socket, "--stay"])
        let copy = dir + "/results/npt-geary-copy"
        try FileManager.default.copyItem(atPath: apps + "/bin/npt-geary", toPath: copy)
        chmod(copy, 0o755)
        chown(copy, uid, uid)
        let copied = dir + "/results/copied"
        try startIn(vte, [copy, script, copied, peer, EnforcementBed.port, socket, "--stay"])
        // A link to the user's copy, and a script of the user's named like the installed one: other files, no app.
        let link = dir + "/results/npt-geary"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: copy)
        let linked = dir + "/results/linked"
        try startIn(vte, [link, script, linked, peer, EnforcementBed.port, socket, "--stay"])
        let named = dir + "/results/npt-maps"
        try FileManager.default.copyItem(atPath: script, toPath: named)
        chown(named, uid, uid)
        let likeMaps = dir + "/results/like-maps"
        try startIn(vte, ["/usr/bin/python3", named, likeMaps, peer, EnforcementBed.port, socket, "--stay"])
        let sandbox = try manager.makeCgroup("app.slice/app-gnome-npt\\x2dgeary-77.scope/sandbox")
        let inside = dir + "/results/inside"
        try startIn(sandbox, ["/usr/bin/python3", script, inside, peer, EnforcementBed.port, socket, "--stay"])
        // A command that opens its socket in the terminal and only then execs an app's program.
        let opener = dir + "/results/opener"
        try startIn(vte, ["/usr/bin/python3", script, opener, peer, EnforcementBed.port, socket,
                          "--open-then-exec", apps + "/bin/npt-geary"])
        for (result, app, place) in [(other, "org.npt.Term", vte), (copied, "org.npt.Term", vte),
                                     (linked, "org.npt.Term", vte), (likeMaps, "org.npt.Term", vte),
                                     (inside, "npt-geary", sandbox)] {
            let l = try lines(result) { self.states($0).contains("refused") || self.states($0).contains("passed") }
            XCTAssertEqual(states(l).prefix(2), ["query", "refused"], "\(result): \(l)")
            let q = l.first?["query"] as? [String: Any] ?? [:]
            XCTAssertEqual(q["app"] as? String, app, "\(result): \(q)")
            XCTAssertEqual(q["enforced"] as? Bool, true, "\(result): \(q)")
            XCTAssertTrue(place.hasSuffix(l.first?["cgroup"] as? String ?? "-"), "\(result) stays where it runs: \(l)")
        }
        // The sub-cgroup's process is asked by the app's name, answered, and listed, as the app's own.
        try checkFoundAndHeld(inside, app: "npt-geary", name: "Test Geary", unit: "app-gnome-npt\\x2dgeary-77.scope/sandbox")
        try checkOpenedBeforeItsExec(opener, place: vte)
    }

    /// A process that opened a socket in the terminal and then exec'd an app's program is that app, in its scope,
    /// and the person's answer lets its new sockets out; the socket it opened before keeps the cgroup it was made in
    /// (the kernel's `socket cgroupv2` reads the socket's, set at its creation: ENFORCEMENT.md, "What escapes"), so
    /// it is still judged as the terminal's and refused, in the same round as a new socket passes.
    private func checkOpenedBeforeItsExec(_ result: String, place: String) throws {
        let l = try lines(result) { self.states($0).suffix(1) == ["passed"] || self.states($0).contains(where: { $0.hasPrefix("never") }) }
        XCTAssertEqual(l.first?["state"] as? String, "opened", "\(l)")
        XCTAssertTrue(place.hasSuffix(l.first?["cgroup"] as? String ?? "-"), "opened in the terminal: \(l)")
        let q = l.first { $0["state"] as? String == "query" }?["query"] as? [String: Any] ?? [:]
        XCTAssertEqual(q["app"] as? String, "npt-geary", "after its exec, the app: \(q)")
        XCTAssertTrue((l.last?["cgroup"] as? String ?? "").contains("/app.slice/app-netpermd-npt\\x2dgeary-"), "\(l)")
        XCTAssertEqual(l.last?["inherited"] as? String, "refused",
                       "the socket opened before the exec gains nothing of the app's answer: \(l)")
        XCTAssertFalse(l.contains { $0["inherited"] as? String == "passed" }, "\(l)")
    }
}
