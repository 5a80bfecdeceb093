// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import NetpermProtocol
import XCTest

/// Debian's desktop apps (issue 47): IDs that are not reverse-DNS (`firefox-esr`), started by GNOME Shell as
/// `app-gnome-firefox\x2desr-4242.scope`, are apps where their user has them installed; named in every language
/// their desktop file has; listed, asked and enforced like any desktop app. Without an entry, such a unit is no app.
final class DebianDesktopAppsTests: XCTestCase {
    static let firefoxUnit = "app-gnome-firefox\\x2desr-4242.scope"
    static let firefoxNames = ["de": "Firefox ESR (Webbrowser)", "zh_CN": "Firefox ESR 浏览器"]

    static var firefox: DesktopEntry {
        var e = DesktopEntry(name: "Firefox ESR", icon: "firefox-esr")
        e.localizedNames = firefoxNames
        e.exec = ["/usr/lib/firefox-esr/firefox-esr"]
        return e
    }

    static var catalog: DesktopCatalog {
        var hidden = DesktopEntry(name: "Firefox ESR")
        hidden.hidden = true
        var missing = DesktopEntry(name: "Gone")
        missing.tryExecMissing = true
        var noDisplay = DesktopEntry(name: "Helper")
        noDisplay.noDisplay = true
        return DesktopCatalog(
            system: ["firefox-esr": firefox, "vlc": DesktopEntry(name: "VLC"), "gone": missing, "helper": noDisplay],
            users: [1001: ["mytool": DesktopEntry(name: "My tool")],
                    1002: ["firefox-esr": hidden]])
    }

    static func peer(_ unit: String, uid: UInt32 = 1000, pid: Int32 = 700) -> PeerIdentity {
        PeerIdentity(pid: pid, uid: uid, gids: [uid], executable: "/usr/lib/firefox-esr/firefox-esr", unit: unit,
                     userUnit: true, slice: "app.slice")
    }

    private func harness() -> EngineHarness {
        let h = EngineHarness(policy: "[Enforcement]\nMode=block\n[Defaults]\nWWAN=ask\n", links: [Links.wwan], agents: true)
        h.feed(.desktopCatalog(Self.catalog))
        return h
    }

    /// A section names a Debian app by `DesktopId=firefox-esr`: its scope is that section's app where the entry is
    /// installed for its user, and no app where it is not (a user's own file deleting it); a section of that id with
    /// no key says how to name it.
    func testASectionNamesADebianAppByItsDesktopID() throws {
        let h = EngineHarness(policy: "[Enforcement]\nMode=block\n[Defaults]\nWWAN=ask\n[App browser]\n"
                              + "DesktopId=firefox-esr.desktop\nWWAN=allow\n", links: [Links.wwan], agents: true)
        h.feed(.desktopCatalog(Self.catalog))
        let r = h.request(h.connect(Self.peer(Self.firefoxUnit)), "QUERY")
        XCTAssertEqual(r["app"], "browser")
        XCTAssertEqual(r["matched_by"], "desktop")
        XCTAssertEqual(r["reason"], "ok")
        let hidden = h.request(h.connect(Self.peer(Self.firefoxUnit, uid: 1002)), "QUERY")
        XCTAssertEqual(hidden["matched_by"], "default", "deleted for uid 1002 by its own Hidden=true")
        let bare = Config.parse(files: [("/etc/netpermd/netpermd.conf", "[App firefox-esr]\nWWAN=allow\n")])
        XCTAssertEqual(bare.errors.map(\.description), ["/etc/netpermd/netpermd.conf:1: [App firefox-esr]: no "
            + "Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it"])
    }

    /// QUERY from Firefox ESR's scope: the app `firefox-esr`, named, in every language its file has, asked.
    func testAnEscapedDebianUnitIsItsInstalledApp() {
        let h = harness()
        let r = h.request(h.connect(Self.peer(Self.firefoxUnit)), "QUERY")
        XCTAssertEqual(r["app"], "firefox-esr")
        XCTAssertEqual(r["matched_by"], "desktop")
        XCTAssertEqual(r["name"], "Firefox ESR")
        XCTAssertEqual(LocalizedName.names(r["names"]), Self.firefoxNames)
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(r["message"], "Firefox ESR may not use wwan yet: waiting for your answer")
    }

    /// Running, it is an app of the rules for its uid, listed by its user's APPS (with its names), and its rejected
    /// datagram raises one prompt with its name.
    func testARunningDebianAppIsListedEnforcedAndAsked() {
        let h = harness()
        let agent = h.connections.keys.max()!
        _ = h.subscribe(agent, "prompts")
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [DesktopAppsTests.cgroup(Self.firefoxUnit, id: 51)])))
        XCTAssertEqual(h.logged(containing: "desktop apps: running now firefox-esr").count, 1, "\(h.log)")
        XCTAssertTrue(h.rules.last?.contains("app.slice/\(Self.firefoxUnit)") == true, "the rules name its scope")
        let alice = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermd-settings", pid: 800)), "APPS")
        let apps = alice["apps"]?.arrayValue ?? []
        XCTAssertEqual(apps.map { $0["app"] }, ["firefox-esr", "vlc"], "NoDisplay, TryExec-missing entries unlisted")
        XCTAssertEqual(apps.first?["name"], "Firefox ESR")
        XCTAssertEqual(LocalizedName.names(apps.first?["names"]), Self.firefoxNames)
        XCTAssertEqual(apps.first?["enforced"], true)
        h.feed(.blocked(app: "firefox-esr", kind: .wwan, uid: 1000, ifindex: 4))
        let p = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(p.count, 1)
        XCTAssertEqual(p.first?["name"], "Firefox ESR")
        XCTAssertEqual(LocalizedName.names(p.first?["names"]), Self.firefoxNames)
        XCTAssertEqual(p.first?["for_uid"], 1000)
    }

    /// No installed entry for the unit's user: no app, in the answer as in the rules. Another user's own entry, a
    /// user's own `Hidden=true` copy and a missing `TryExec=` install nothing for them.
    func testWithoutAnInstalledEntryItIsNoApp() {
        let h = harness()
        for (unit, uid) in [("app-gnome-gimp-12.scope", UInt32(1000)), ("app-gnome-mytool-13.scope", 1000),
                            (Self.firefoxUnit, 1002), ("app-gnome-gone-14.scope", 1000)] {
            let r = h.request(h.connect(Self.peer(unit, uid: uid, pid: 900 + Int32(uid))), "QUERY")
            XCTAssertEqual(r["matched_by"], "default", "\(unit) of uid \(uid)")
            XCTAssertEqual(r["name"], nil, unit)
        }
        XCTAssertEqual(h.request(h.connect(Self.peer("app-gnome-mytool-13.scope", uid: 1001, pid: 950)), "QUERY")["app"],
                       "mytool", "its own user's entry makes it an app")
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [
            DesktopAppsTests.cgroup("app-gnome-mytool-13.scope", uid: 1000, id: 61),
            DesktopAppsTests.cgroup(Self.firefoxUnit, uid: 1002, id: 62),
        ])))
        XCTAssertTrue(h.engine.state.config.apps.filter(\.discovered).isEmpty, "\(h.engine.state.config.apps.map(\.id))")
        XCTAssertFalse(h.rules.last?.contains("mytool") == true)
        XCTAssertFalse(h.rules.last?.contains("firefox") == true)
    }

    /// A connection made before the desktop files were read is the app once they are.
    func testTheAppFollowsWhatIsInstalled() {
        let h = EngineHarness(policy: "[Defaults]\nWWAN=ask\n", links: [Links.wwan])
        let c = h.connect(Self.peer(Self.firefoxUnit))
        XCTAssertEqual(h.request(c, "QUERY")["matched_by"], "default")
        h.feed(.desktopCatalog(Self.catalog))
        XCTAssertEqual(h.request(c, "QUERY")["matched_by"], "desktop")
        XCTAssertEqual(h.request(c, "QUERY")["name"], "Firefox ESR")
        h.feed(.desktopCatalog(DesktopCatalog()))
        XCTAssertEqual(h.request(c, "QUERY")["matched_by"], "default")
    }
}

/// The Desktop Entry spec as GLib reads it: deleted and hidden entries, TryExec, OnlyShowIn, Exec's quoting.
final class DesktopEntrySpecTests: XCTestCase {
    private func parse(_ body: String) -> DesktopEntry? {
        DesktopEntry.parse(Array(("[Desktop Entry]\nType=Application\nName=X\n" + body).utf8))
    }

    func testHiddenNoDisplayAndShowIn() throws {
        let hidden = try XCTUnwrap(parse("Hidden=true\n"))
        XCTAssertTrue(hidden.hidden)
        XCTAssertFalse(hidden.isInstalled, "Hidden is the spec's deleted")
        let nd = try XCTUnwrap(parse("NoDisplay=true\n"))
        XCTAssertFalse(nd.hidden)
        XCTAssertTrue(nd.isInstalled, "an app still when it runs")
        XCTAssertFalse(nd.isListed, "not in menus, as g_app_info_should_show says")
        let kde = try XCTUnwrap(parse("OnlyShowIn=KDE;LXQt;\nNotShowIn=GNOME;\n"))
        XCTAssertEqual(kde.onlyShowIn, ["KDE", "LXQt"])
        XCTAssertEqual(kde.notShowIn, ["GNOME"])
        XCTAssertTrue(kde.isListed, "the daemon has no desktop: another desktop's app is listed, for the face to judge")
        XCTAssertEqual(parse("OnlyShowIn=" + String(repeating: "A;", count: 100) + "\n")?.onlyShowIn.count,
                       DesktopEntry.maxDesktops)
        let tryExec = try XCTUnwrap(parse("TryExec=firefox-esr\nDBusActivatable=true\n"))
        XCTAssertEqual(tryExec.tryExec, "firefox-esr")
        XCTAssertTrue(tryExec.dbusActivatable)
    }

    func testExecQuotingAndFieldCodes() {
        let cases: [(String, [String]?)] = [
            ("Exec=/usr/lib/firefox-esr/firefox-esr %u", ["/usr/lib/firefox-esr/firefox-esr"]),
            ("Exec=libreoffice --writer %U", ["libreoffice", "--writer"]),
            ("Exec=\"/opt/My App/run\" --name=%c %i %%done", ["/opt/My App/run", "--name=", "%done"]),
            ("Exec=sh -c \"echo \\\\\"hi\\\\\" \\\\$HOME\"", ["sh", "-c", "echo \"hi\" $HOME"]),
            ("Exec='single quoted' arg", ["single quoted", "arg"]),
            ("Exec=\"unterminated", nil),
            ("Exec=%f %u", nil),
        ]
        for (line, argv) in cases { XCTAssertEqual(parse(line + "\n")?.exec, argv, line) }
    }

    func testProgramsAreLookedUpAsGLibDoes() {
        let present: Set<String> = ["/usr/bin/firefox-esr", "/usr/local/bin/vlc", "/usr/bin/vlc", "/opt/x/run"]
        let exe: (String) -> Bool = { present.contains($0) }
        XCTAssertEqual(DesktopExec.resolve("firefox-esr", path: nil, isExecutable: exe), "/usr/bin/firefox-esr")
        XCTAssertEqual(DesktopExec.resolve("vlc", path: nil, isExecutable: exe), "/usr/local/bin/vlc", "PATH's order")
        XCTAssertEqual(DesktopExec.resolve("vlc", path: "relative:/usr/bin", isExecutable: exe), "/usr/bin/vlc")
        XCTAssertEqual(DesktopExec.resolve("/opt/x/run", path: nil, isExecutable: exe), "/opt/x/run")
        XCTAssertNil(DesktopExec.resolve("gimp", path: nil, isExecutable: exe))
        XCTAssertNil(DesktopExec.resolve("x/run", path: nil, isExecutable: exe))
        XCTAssertTrue(DesktopExec.isMissing(tryExec: "gimp", path: nil, isExecutable: exe))
        XCTAssertTrue(DesktopExec.isMissing(tryExec: "/usr/bin/gimp", path: nil, isExecutable: exe))
        XCTAssertFalse(DesktopExec.isMissing(tryExec: "firefox-esr", path: nil, isExecutable: exe))
        XCTAssertFalse(DesktopExec.isMissing(tryExec: "bin/gimp", path: nil, isExecutable: exe), "relative: unknowable")
    }

    /// A user's own `Hidden=true` file deletes everyone's entry of that ID for that user only; a user's own file
    /// is theirs, never another's; NoDisplay= keeps it out of the list, not out of the apps.
    func testHiddenPerUser() {
        var hidden = DesktopEntry(name: "Firefox ESR")
        hidden.hidden = true
        var nd = DesktopEntry(name: "Helper")
        nd.noDisplay = true
        let c = DesktopCatalog(system: ["firefox-esr": DesktopEntry(name: "Firefox ESR"), "helper": nd],
                               users: [1000: ["firefox-esr": hidden, "mytool": DesktopEntry(name: "Mine")]])
        XCTAssertNil(c.entry("firefox-esr", uid: 1000))
        XCTAssertEqual(c.entry("firefox-esr", uid: 1001)?.name, "Firefox ESR")
        XCTAssertEqual(c.entry("firefox-esr", uid: nil)?.name, "Firefox ESR")
        XCTAssertNil(c.entry("mytool", uid: 1001))
        let installed = c.installed
        XCTAssertFalse(installed.contains("firefox-esr", uid: 1000))
        XCTAssertTrue(installed.contains("firefox-esr", uid: 1001))
        XCTAssertTrue(installed.contains("mytool", uid: 1000))
        XCTAssertFalse(installed.contains("mytool", uid: 1001))
        XCTAssertTrue(installed.contains("helper", uid: 1000), "NoDisplay: installed")
        XCTAssertEqual(c.listed(uid: 1000), ["mytool"])
        XCTAssertEqual(c.listed(uid: 1001), ["firefox-esr"])
    }

    func testLocalizedNames() {
        let names = ["de": "Karten", "pt_BR": "Mapas", "sr@latin": "Mape", "zh_CN": "地图"]
        XCTAssertEqual(LocalizedName.pick(names, locale: "de_AT.UTF-8"), "Karten")
        XCTAssertEqual(LocalizedName.pick(names, locale: "pt_BR.UTF-8"), "Mapas")
        XCTAssertEqual(LocalizedName.pick(names, locale: "sr_RS@latin"), "Mape")
        XCTAssertEqual(LocalizedName.pick(names, locale: "zh_CN.UTF-8"), "地图")
        XCTAssertNil(LocalizedName.pick(names, locale: "C.UTF-8"))
        XCTAssertNil(LocalizedName.pick(names, locale: "fr_FR"))
        let env = ["LANG": "de_DE.UTF-8", "LC_MESSAGES": "", "LC_ALL": nil]
        XCTAssertEqual(LocalizedName.messagesLocale { env[$0] ?? nil }, "de_DE.UTF-8")
        XCTAssertEqual(LocalizedName.messagesLocale { ["LC_ALL": "zh_CN.UTF-8", "LANG": "de_DE"][$0] }, "zh_CN.UTF-8")
    }
}
