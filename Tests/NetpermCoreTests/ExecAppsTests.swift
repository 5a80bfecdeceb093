// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import NetpermProtocol
import XCTest

/// Apps known by what they run (issue 47, rule 2): where a process of a person's session runs (SessionPlace), which
/// installed app its executable or script is (ExecIndex, by device and inode), the scope it is given
/// (`app-netpermd-ID-PID.scope`), a terminal's command scope as the terminal's app, and the engine's bounded asks.
final class ExecAppsTests: XCTestCase {
    static let home = "/user.slice/user-1000.slice/user@1000.service"
    static let firefox = FileKey(device: 8, inode: 100)
    static let gjs = FileKey(device: 8, inode: 200)
    static let mapsScript = FileKey(device: 8, inode: 201)
    static let copy = FileKey(device: 9, inode: 100)

    static var catalog: DesktopCatalog {
        var ff = DesktopEntry(name: "Firefox ESR")
        ff.programFile = firefox
        var maps = DesktopEntry(name: "Maps")
        maps.dbusActivatable = true
        maps.interpreterFile = gjs
        maps.scriptFile = mapsScript
        var shell = DesktopEntry(name: "GNOME Shell")
        shell.noDisplay = true
        shell.programFile = FileKey(device: 8, inode: 300)
        var hidden = DesktopEntry(name: "Firefox ESR")
        hidden.hidden = true
        var mine = DesktopEntry(name: "Mine")
        mine.programFile = copy
        return DesktopCatalog(system: ["firefox-esr": ff, "org.gnome.Maps": maps, "org.gnome.Shell": shell],
                              users: [1002: ["firefox-esr": hidden], 1003: ["mytool": mine]])
    }

    func testWhereAProcessRuns() {
        func place(_ path: String) -> SessionPlace? { SessionPlace.of(cgroup: "0::\(path)\n")?.place }
        XCTAssertEqual(place(Self.home + "/session.slice/dbus.service"), .dbusActivation)
        XCTAssertEqual(place(Self.home + "/session.slice/phosh.service"), .sessionUnit("phosh.service"))
        XCTAssertEqual(place("/user.slice/user-1000.slice/session-3.scope"), .loginSession("session-3.scope"))
        XCTAssertEqual(place(Self.home + "/app.slice/app-org.gnome.Terminal.slice/vte-spawn-5a.scope"), .terminal("vte-spawn-5a.scope"))
        XCTAssertEqual(SessionPlace.of(cgroup: "0::\(Self.home)/session.slice/dbus.service\n")?.uid, 1000)
        XCTAssertEqual(SessionPlace.of(cgroup: "0::/user.slice/user-1001.slice/session-3.scope\n")?.uid, 1001)
        // Hybrid hierarchies: the name=systemd line.
        XCTAssertEqual(SessionPlace.of(cgroup: "1:name=systemd:\(Self.home)/session.slice/dbus.service\n")?.place, .dbusActivation)
        // Not looked at: app units (they are apps already), the desktop's background, system services, the manager.
        for path in [Self.home + "/app.slice/app-gnome-firefox\\x2desr-42.scope", Self.home + "/background.slice/x.service",
                     "/system.slice/cron.service", Self.home + "/init.scope", Self.home + "/app.slice/app-netpermd-vlc-7.scope",
                     Self.home + "/session.slice/dbus.service/sub.scope", "/user.slice/user-x.slice/session-1.scope", ""] {
            XCTAssertNil(place(path), path)
        }
    }

    func testWhichAppAProcessRuns() {
        let index = ExecIndex(catalog: Self.catalog)
        XCTAssertTrue(index.mayRun(Self.firefox))
        XCTAssertTrue(index.mayRun(Self.gjs))
        XCTAssertFalse(index.mayRun(FileKey(device: 8, inode: 300)), "a NoDisplay entry's program (the desktop's own)")
        XCTAssertEqual(index.app(uid: 1000, exe: Self.firefox, script: nil), "firefox-esr")
        XCTAssertNil(index.app(uid: 1002, exe: Self.firefox, script: nil), "deleted for that user by their own file")
        // A copy of the program (another file with the same name) is not the app; the user's own entry is theirs only.
        XCTAssertNil(index.app(uid: 1000, exe: Self.copy, script: nil))
        XCTAssertEqual(index.app(uid: 1003, exe: Self.copy, script: nil), "mytool")
        // An interpreted app: the interpreter alone is no app, its script is.
        XCTAssertEqual(index.app(uid: 1000, exe: Self.gjs, script: Self.mapsScript), "org.gnome.Maps")
        XCTAssertNil(index.app(uid: 1000, exe: Self.gjs, script: FileKey(device: 8, inode: 999)))
        XCTAssertNil(index.app(uid: 1000, exe: Self.gjs, script: nil))
        XCTAssertEqual(ExecIndex.scriptArgument(["/usr/bin/gjs", "-m", "/usr/bin/gnome-maps", "--gapplication-service"]),
                       "/usr/bin/gnome-maps")
        XCTAssertNil(ExecIndex.scriptArgument(["python3"]))
    }

    func testTheScopeIsNamedAsALauncherNamesIt() {
        XCTAssertEqual(ScopeRequest(uid: 1000, pid: 4242, app: "firefox-esr").unit, "app-netpermd-firefox\\x2desr-4242.scope")
        XCTAssertEqual(ScopeRequest(uid: 1000, pid: 7, app: "org.gnome.Maps").unit, "app-netpermd-org.gnome.Maps-7.scope")
        // And read back as the app, by the same rule as every launcher's scope.
        let installed = InstalledDesktopApps(system: ["firefox-esr"])
        XCTAssertEqual(DesktopAppID.from(unit: "app-netpermd-firefox\\x2desr-4242.scope", slice: "app.slice", uid: 1000,
                                         installed: installed), "firefox-esr")
    }

    /// A terminal's command scope in the terminal's slice is the terminal's app (issue 47: as macOS holds a command
    /// to Terminal); in app.slice alone, or in the desktop's slices, it is nobody's app.
    func testATerminalsCommandIsTheTerminals() {
        XCTAssertEqual(DesktopAppID.from(unit: "vte-spawn-0f1e.scope", slice: "app-org.gnome.Terminal.slice"), "org.gnome.Terminal")
        XCTAssertEqual(DesktopAppID.from(unit: "vte-spawn-0f1e.scope", slice: "app-gnome-org.gnome.Console-12.slice"),
                       "org.gnome.Console")
        XCTAssertNil(DesktopAppID.from(unit: "vte-spawn-0f1e.scope", slice: "app.slice"))
        XCTAssertNil(DesktopAppID.from(unit: "vte-spawn-0f1e.scope", slice: "session.slice"))
        XCTAssertEqual(DesktopAppID.from(unit: "vte-spawn-1.scope", slice: "app-xterm.slice", uid: 1000,
                                         installed: InstalledDesktopApps(system: ["xterm"])), "xterm")
        XCTAssertNil(DesktopAppID.from(unit: "vte-spawn-1.scope", slice: "app-xterm.slice", uid: 1000,
                                       installed: InstalledDesktopApps()), "an ID not installed is no app")
        let peer = PeerIdentity(pid: 9, uid: 1000, gids: [1000], executable: "/usr/bin/make", unit: "vte-spawn-0f1e.scope",
                                userUnit: true, slice: "app-org.gnome.Terminal.slice")
        let config = try! parsePolicy("")
        XCTAssertEqual(config.match(peer).id, "org.gnome.Terminal")
        XCTAssertEqual(config.match(peer).matchedBy, .desktop)
        let named = try! parsePolicy("[App make]\nExecutable=/usr/bin/make\n")
        XCTAssertEqual(named.match(peer).id, "make", "unless the policy names it")
    }

    private func harness() -> EngineHarness {
        let h = EngineHarness(policy: "[Enforcement]\nMode=block\n[Defaults]\nWWAN=ask\n", links: [Links.wwan], agents: true)
        h.feed(.desktopCatalog(Self.catalog))
        return h
    }

    func testTheEngineAsksForABoundedNumberOfScopes() {
        let h = harness()
        XCTAssertTrue(h.steps.contains("watch-execs"), "the index goes to the edge with the desktop files")
        h.scopesAreManual = true
        h.feed(.execFound(ExecFound(pid: 4242, uid: 1000, app: "firefox-esr", place: .dbusActivation,
                                    executable: "/usr/lib/firefox-esr/firefox-esr")))
        XCTAssertEqual(h.pendingScopes.map(\.unit), ["app-netpermd-firefox\\x2desr-4242.scope"])
        h.feed(.execFound(ExecFound(pid: 4242, uid: 1000, app: "firefox-esr", place: .dbusActivation,
                                    executable: "/usr/lib/firefox-esr/firefox-esr")))
        XCTAssertEqual(h.pendingScopes.count, 1, "found again while its scope is made: asked once")
        for pid in Int32(1)...10 {
            h.feed(.execFound(ExecFound(pid: pid, uid: 1000, app: "firefox-esr", place: .terminal("vte-spawn-1.scope"),
                                        executable: nil)))
        }
        XCTAssertEqual(h.pendingScopes.count, Engine.maxScopesPerUID, "at most \(Engine.maxScopesPerUID) a uid")
        XCTAssertEqual(h.logged(containing: "and not made yet").count, 1, "said once per burst")
        // A failure is said once per app at warning.
        let failure = EdgeError(.makeScope, "Access denied")
        for r in h.pendingScopes { h.feed(.scopeMade(r, error: failure)) }
        h.pendingScopes = []
        XCTAssertEqual(h.log.filter { $0.0 == .warning && $0.1.contains("no scope for pid") }.count, 1, "\(h.log)")
        h.feed(.execFound(ExecFound(pid: 50, uid: 1000, app: "firefox-esr", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(h.pendingScopes.count, 1, "answered requests free their place")
    }

    /// A user's own `netpermctl scopes` (a subscriber of `scopes` of the process's uid) is asked instead of the
    /// daemon's own request of the manager: one event to the first such connection, answered by SCOPE from it only;
    /// no answer within the time, or the connection gone, is a failure that frees the place.
    func testAUsersOwnNetpermctlScopesIsAskedAndAnswers() throws {
        let h = harness()
        h.scopesAreManual = true
        let mine = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 70))
        let other = h.connect(makePeer(uid: 1001, exe: "/usr/bin/netpermctl", pid: 71))
        let second = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 72))
        for c in [mine, other, second] { _ = h.subscribe(c, "scopes") }
        h.feed(.execFound(ExecFound(pid: 4242, uid: 1000, app: "org.gnome.Maps", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(h.pendingScopes, [], "the daemon asks nothing itself")
        let wanted = EngineHarness.events(h.take(mine), named: "scope-wanted")
        XCTAssertEqual(wanted.count, 1)
        XCTAssertEqual(wanted.first?["unit"]?.stringValue, "app-netpermd-org.gnome.Maps-4242.scope")
        XCTAssertEqual(wanted.first?["pid"]?.intValue, 4242)
        XCTAssertEqual(wanted.first?["slice"]?.stringValue, "app.slice")
        XCTAssertEqual(EngineHarness.events(h.take(other)), [], "another uid's hears nothing")
        XCTAssertEqual(EngineHarness.events(h.take(second)), [], "only the first of the uid's is asked")
        let id = try XCTUnwrap(wanted.first?["id"]?.intValue)
        XCTAssertEqual(EngineHarness.parse(h.send(other, "SCOPE \(id) made").first ?? "")["error"]?.stringValue, "not-found",
                       "only the connection asked answers")
        XCTAssertEqual(EngineHarness.parse(h.send(mine, "SCOPE \(id) made").first ?? "")["ok"]?.boolValue, true)
        XCTAssertEqual(h.engine.appBooks.execs.scopesMade, 1)
        XCTAssertEqual(h.engine.appBooks.execs.scopesByUsers, 1)
        XCTAssertEqual(EngineHarness.parse(h.send(mine, "SCOPE \(id) made").first ?? "")["error"]?.stringValue, "not-found",
                       "answered once")

        // Unanswered: a failure after the time; the connection gone: a failure at once. Both free the place.
        h.feed(.execFound(ExecFound(pid: 4243, uid: 1000, app: "org.gnome.Maps", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(EngineHarness.events(h.take(mine), named: "scope-wanted").count, 1)
        h.advance(by: Engine.scopeAnswerSec * 1_000_000)
        XCTAssertEqual(h.engine.appBooks.execs.scopesFailed, 1)
        XCTAssertEqual(h.logged(containing: "did not answer within").count, 1, "\(h.log)")
        h.feed(.execFound(ExecFound(pid: 4244, uid: 1000, app: "org.gnome.Maps", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(EngineHarness.events(h.take(mine), named: "scope-wanted").count, 1)
        h.disconnect(mine)
        XCTAssertEqual(h.engine.appBooks.execs.scopesFailed, 2)
        XCTAssertEqual(h.engine.appBooks.execs.asked.count, 0)
        XCTAssertEqual(h.engine.appBooks.execs.total, 0, "every place freed")
        // The next is the uid's other one's; with none left, the daemon's own request.
        h.feed(.execFound(ExecFound(pid: 4245, uid: 1000, app: "org.gnome.Maps", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(EngineHarness.events(h.take(second), named: "scope-wanted").count, 1)
        h.disconnect(second)
        h.feed(.execFound(ExecFound(pid: 4246, uid: 1000, app: "org.gnome.Maps", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(h.pendingScopes.map(\.pid), [4246])
    }

    /// OWNS NAME PID: a name that is an installed app's ID for the caller's uid (an entry menus show) is that app's,
    /// checked at the edge, then given a scope like a process found by its program; any other name is not-found.
    func testAProcessOwningAnInstalledAppsNameIsThatApp() {
        let h = harness()
        h.scopesAreManual = true
        let c = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 70))
        let r = EngineHarness.parse(h.send(c, "OWNS org.gnome.Maps 4242").first ?? "")
        XCTAssertEqual(r["ok"]?.boolValue, true, "\(r)")
        XCTAssertEqual(r["app"]?.stringValue, "org.gnome.Maps")
        XCTAssertEqual(h.claims, [ProcessClaim(pid: 4242, uid: 1000, app: "org.gnome.Maps")])
        XCTAssertEqual(h.pendingScopes.map(\.unit), ["app-netpermd-org.gnome.Maps-4242.scope"])
        for name in ["org.gnome.Shell", "org.example.NotInstalled", "firefox-esr", "org.freedesktop.Notifications"] {
            let e = EngineHarness.parse(h.send(c, "OWNS \(name) 4243").first ?? "")
            XCTAssertEqual(e["error"]?.stringValue, "not-found", "\(name): \(e)")
        }
        XCTAssertEqual(h.claims.count, 1, "nothing else looked at")
    }

    func testThePolicyOrDesktopAppsNoKeepsAProcessWhereItRuns() {
        let h = EngineHarness(policy: "[App fx]\nExecutable=/usr/lib/firefox-esr/firefox-esr\n", links: [Links.wwan])
        h.feed(.desktopCatalog(Self.catalog))
        h.scopesAreManual = true
        h.feed(.execFound(ExecFound(pid: 1, uid: 1000, app: "firefox-esr", place: .dbusActivation,
                                    executable: "/usr/lib/firefox-esr/firefox-esr")))
        XCTAssertEqual(h.pendingScopes, [], "an [App] names its executable")
        let off = EngineHarness(policy: "[Defaults]\nDesktopApps=no\n", links: [Links.wwan])
        off.scopesAreManual = true
        off.feed(.execFound(ExecFound(pid: 1, uid: 1000, app: "firefox-esr", place: .dbusActivation, executable: nil)))
        XCTAssertEqual(off.pendingScopes, [])
    }
}
