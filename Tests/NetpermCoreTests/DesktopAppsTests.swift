// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// Desktop apps (docs/APPS.md, "Desktop apps"): an app a user's manager runs under its application ID is that app,
/// with `[Defaults]`' permissions, no policy line; named and drawn by its desktop file.
final class DesktopAppsTests: XCTestCase {
    static let home = "user.slice/user-1000.slice/user@1000.service"
    static let mapsUnit = "app-gnome-org.example.Maps-1234.scope"

    static func mapsPeer(uid: UInt32 = 1000, pid: Int32 = 700, slice: String = "app.slice") -> PeerIdentity {
        PeerIdentity(pid: pid, uid: uid, gids: [uid], executable: "/usr/bin/gnome-maps", unit: mapsUnit, userUnit: true,
                     slice: slice)
    }

    static func cgroup(_ unit: String, uid: UInt32 = 1000, id: UInt64, slice: String = "app.slice") -> UnitCgroup {
        UnitCgroup(path: "user.slice/user-\(uid).slice/user@\(uid).service/\(slice)/\(unit)", level: 5, unit: unit,
                   id: id, user: true)
    }

    // MARK: The policy

    func testADesktopAppIsItsApplicationID() throws {
        let config = try parsePolicy("[Defaults]\nWWAN=deny\n")
        let m = config.match(Self.mapsPeer())
        XCTAssertEqual(m.id, "org.example.Maps")
        XCTAssertEqual(m.matchedBy, .desktop)
        XCTAssertEqual(m.app?.discovered, true)
        XCTAssertEqual(config.permissions(for: m.app).wwan, .deny, "[Defaults]' permissions")
        // Flatpak's and KDE's names, the same app.
        for unit in ["app-flatpak-org.example.Maps-77.scope", "app-org.example.Maps@9c2d.service"] {
            var p = Self.mapsPeer()
            p.unit = unit
            XCTAssertEqual(config.match(p).id, "org.example.Maps", unit)
        }
    }

    /// The desktop's own units, a terminal's command, a system unit and an unfollowed one are no desktop app.
    func testWhatIsNoDesktopApp() throws {
        let config = try parsePolicy("")
        for slice in ["session.slice", "background.slice"] {
            XCTAssertEqual(config.match(Self.mapsPeer(slice: slice)).matchedBy, .defaults, slice)
        }
        var vte = Self.mapsPeer()
        vte.unit = "vte-spawn-0a1b.scope"
        XCTAssertEqual(config.match(vte).matchedBy, .defaults)
        var system = Self.mapsPeer()
        system.userUnit = false
        XCTAssertEqual(config.match(system).matchedBy, .defaults, "a system unit's name is the admin's, not an app ID")
        var deep = Self.mapsPeer()
        deep.unitFollowed = false
        XCTAssertEqual(config.match(deep).matchedBy, .defaults, "what the rules cannot follow is not one either")
    }

    /// Issue 47: a unit inside an app's unit (a terminal's tab scope inside its own, a browser's sandbox scopes) is
    /// that app, in the answer as in the kernel, whose rules follow only the enclosing unit's cgroup. It used to be
    /// `[Defaults]` under its executable, `enforced:false`, while the kernel refused it as the app.
    func testAUnitInsideAnAppsUnitIsThatApp() throws {
        let config = try parsePolicy("""
            [App host]
            Unit=npt-host.service

            [App inner]
            Unit=npt-inner.scope

            [App tabs]
            UserUnit=app-org.example.Term-*.scope

            """)
        func peer(_ cgroup: String, uid: UInt32 = 1000) throws -> PeerIdentity {
            let u = try XCTUnwrap(PeerIdentity.unitAndManager(fromCgroup: "0::/" + cgroup + "\n"))
            return PeerIdentity(pid: 7, uid: uid, gids: [uid], executable: "/usr/bin/python3.11", unit: u.unit,
                                userUnit: u.user, unitFollowed: u.followed, slice: u.slice, enclosing: u.enclosing)
        }
        let maps = try peer(Self.home + "/app.slice/" + Self.mapsUnit + "/tab-3.scope")
        XCTAssertEqual(maps.unit, "tab-3.scope")
        XCTAssertFalse(maps.unitFollowed)
        let resolved = config.resolve(maps)
        XCTAssertEqual(resolved.match.id, "org.example.Maps")
        XCTAssertEqual(resolved.match.matchedBy, .desktop)
        XCTAssertEqual(resolved.identity.unit, Self.mapsUnit, "seen as in the unit the rules follow")
        XCTAssertTrue(resolved.identity.unitFollowed)
        // Deeper still, and a sandbox's cgroup that is no unit: the app all the same.
        XCTAssertEqual(config.match(try peer(Self.home + "/app.slice/" + Self.mapsUnit + "/a.scope/b.scope")).id, "org.example.Maps")
        XCTAssertEqual(config.match(try peer(Self.home + "/app.slice/" + Self.mapsUnit + "/sandbox")).id, "org.example.Maps")
        XCTAssertEqual(config.match(try peer(Self.home + "/app.slice/app-org.example.Term-1.scope/vte-spawn-9.scope")).id, "tabs")
        // A system unit's inner unit is that unit's app; with none, its own (which the rules cannot follow).
        XCTAssertEqual(config.match(try peer("system.slice/npt-host.service/npt-inner.scope")).id, "host")
        let lone = try peer("system.slice/npt-other.service/npt-inner.scope")
        XCTAssertEqual(config.resolve(lone).match.id, "inner")
        XCTAssertFalse(config.resolve(lone).identity.unitFollowed)
        // The user's manager is no unit of theirs: its own units are not inside "user@1000.service" as an app.
        XCTAssertNil(try peer(Self.home + "/app.slice/" + Self.mapsUnit).enclosing)
        XCTAssertNil(try peer("system.slice/npt-host.service").enclosing)
    }

    /// `[App APPID]` needs no other key and overrides `[Defaults]`; `DesktopId=` names it for another id; explicit
    /// `UserUnit=` globs come first, as in the rules.
    func testAnAppSectionOverrides() throws {
        let config = try parsePolicy("""
            [Defaults]
            WWAN=ask
            [App org.example.Maps]
            WWAN=allow
            [App notes]
            DesktopId=org.example.Notes.desktop
            WWAN=deny
            [App mine]
            UserUnit=app-gnome-org.example.Mine-*.scope
            """)
        let m = config.match(Self.mapsPeer())
        XCTAssertEqual(m.id, "org.example.Maps")
        XCTAssertEqual(m.matchedBy, .desktop)
        XCTAssertEqual(m.app?.discovered, false)
        XCTAssertEqual(config.permissions(for: m.app).wwan, .allow)
        var notes = Self.mapsPeer()
        notes.unit = "app-flatpak-org.example.Notes-77.scope"
        XCTAssertEqual(config.match(notes).id, "notes")
        var mine = Self.mapsPeer()
        mine.unit = "app-gnome-org.example.Mine-5.scope"
        XCTAssertEqual(config.match(mine).matchedBy, .unit)
    }

    /// `DesktopApps=no`: only `DesktopId=` names a desktop app; a section with nothing else is an error, as before.
    func testDesktopAppsNo() throws {
        let config = try parsePolicy("[Defaults]\nDesktopApps=no\n[App notes]\nDesktopId=org.example.Notes\n")
        XCTAssertEqual(config.match(Self.mapsPeer()).matchedBy, .defaults)
        var notes = Self.mapsPeer()
        notes.unit = "app-flatpak-org.example.Notes-77.scope"
        XCTAssertEqual(config.match(notes).id, "notes")
        XCTAssertEqual(config.addingDesktopApps(["org.example.Maps"]).apps.count, 1)
        let bad = Config.parse(files: [("/etc/netpermd/netpermd.conf", "[Defaults]\nDesktopApps=no\n[App org.example.Maps]\n")])
        XCTAssertEqual(bad.errors.map(\.description), ["/etc/netpermd/netpermd.conf:3: [App org.example.Maps]: no "
            + "Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it (DesktopApps=no)"])
        let word = Config.parse(files: [("/etc/netpermd/netpermd.conf", "[App x]\nDesktopId=0ad\n[Defaults]\nDesktopApps=maybe\n")])
        XCTAssertEqual(word.errors.map(\.description), [
            "/etc/netpermd/netpermd.conf:2: [App x]: DesktopId= takes desktop-file IDs such as org.gnome.Maps or "
                + "firefox-esr (a letter, then letters, digits, '.', '-' and '_'), got '0ad'",
            "/etc/netpermd/netpermd.conf:4: [Defaults]: bad value 'maybe' for DesktopApps= (expected yes or no)",
        ])
    }

    // MARK: The rules

    /// A desktop app's unit is owned like a `UserUnit=` unit: its maps narrow its uid, never widen it.
    func testTheRulesNameADesktopAppsUnit() throws {
        let config = try parsePolicy("[Defaults]\nWWAN=deny\n").addingDesktopApps(["org.example.Maps"])
        let cgroups = UnitCgroups(nftRoot: "", units: [
            Self.cgroup(Self.mapsUnit, id: 51),
            Self.cgroup("app-gnome-org.example.Shell-1.scope", id: 52, slice: "session.slice"),
        ])
        let r = Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) }, ownPermissions: { _, _ in nil },
                              links: [Links.lo, Links.wwan], cgroups: cgroups)
        XCTAssertEqual(r.maps.first { $0.name == "user5_wwan" }?.elements.map(\.text),
                       ["\"\(Self.home)/app.slice/\(Self.mapsUnit)\" : goto deny"])
        XCTAssertEqual(r.unitIDs, [51], "the desktop's own session.slice unit is not named")
    }

    // MARK: The engine

    static let catalog = DesktopCatalog(
        system: ["org.example.Maps": DesktopEntry(name: "Maps", icon: "org.example.Maps"),
                 "org.example.Notes": DesktopEntry(name: "Notes", icon: "notes")],
        users: [1000: ["org.example.Mine": DesktopEntry(name: "Mine", icon: "/home/alice/mine.png"),
                       "org.example.Maps": DesktopEntry(name: "Alice's Maps")],
                1001: ["org.example.Theirs": DesktopEntry(name: "Theirs")]])

    private func harness(policy: String = "[Enforcement]\nMode=block\n") -> EngineHarness {
        let h = EngineHarness(policy: policy, links: [Links.wwan], agents: true)
        h.feed(.desktopCatalog(Self.catalog))
        return h
    }

    /// QUERY from the app's unit: its id, name and icon (the user's own file first), and the message names it.
    func testQueryNamesTheApp() {
        let h = harness()
        let r = h.request(h.connect(Self.mapsPeer()), "QUERY")
        XCTAssertEqual(r["app"], "org.example.Maps")
        XCTAssertEqual(r["matched_by"], "desktop")
        XCTAssertEqual(r["name"], "Alice's Maps", "uid 1000's own desktop file names its own apps")
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(r["message"], "Alice's Maps may not use wwan yet: waiting for your answer")
        let bob = h.request(h.connect(Self.mapsPeer(uid: 1001, pid: 701)), "QUERY")
        XCTAssertEqual(bob["name"], "Maps", "not alice's name for uid 1001")
        XCTAssertEqual(bob["icon"], "org.example.Maps")
    }

    /// A unit of it appearing makes it an app of the policy's: enforced, listed, asked by its rejected packets,
    /// with its name in the prompt, for that uid.
    func testARunningDesktopAppIsEnforcedAndAsked() {
        let h = harness()
        let agent = h.connections.keys.max()!
        _ = h.subscribe(agent, "prompts")
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [Self.cgroup(Self.mapsUnit, uid: 1001, id: 51)])))
        XCTAssertTrue(h.logged(containing: "desktop apps: running now org.example.Maps").count == 1, "\(h.log)")
        let apps = h.request(agent, "APPS")["apps"]?.arrayValue ?? []
        XCTAssertEqual(apps.map { $0["app"] }, ["org.example.Maps", "org.example.Notes"])
        XCTAssertEqual(apps.map { $0["matched_by"] }, ["desktop", "desktop"])
        XCTAssertEqual(apps.map { $0["installed"] }, [true, true])
        XCTAssertEqual(apps.map { $0["name"] }, ["Maps", "Notes"], "everyone's names, not a user's")
        h.feed(.blocked(app: "org.example.Maps", kind: .wwan, uid: 1001, ifindex: 4))
        let p = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(p.first?["name"], "Maps")
        XCTAssertEqual(p.first?["icon"], "org.example.Maps")
        XCTAssertEqual(p.first?["for_uid"], 1001)
        XCTAssertEqual(p.first?["user_named"], true)
        // With UserDecisions=no the prompt is everyone's: never titled by a user's own file (uid 1000's "Alice's Maps").
        let shared = EngineHarness(policy: "[Enforcement]\nMode=block\n[Defaults]\nUserDecisions=no\n", links: [Links.wwan], agents: true)
        shared.feed(.desktopCatalog(Self.catalog))
        let admin = shared.connections.keys.max()!
        _ = shared.subscribe(admin, "prompts")
        shared.feed(.cgroups(UnitCgroups(nftRoot: "", units: [Self.cgroup(Self.mapsUnit, id: 51)])))
        shared.feed(.blocked(app: "org.example.Maps", kind: .wwan, uid: 1000, ifindex: 4))
        let everyone = shared.takeEvents(admin, named: "prompt")
        XCTAssertEqual(everyone.first?["for_uid"], .null)
        XCTAssertEqual(everyone.first?["name"], "Maps")
        // Its unit gone: no longer the policy's, still listed as installed.
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [])))
        XCTAssertEqual(h.logged(containing: "desktop apps: gone org.example.Maps").count, 1)
    }

    /// A user's APPS: the desktop apps installed for everyone and for them, and those they run, as their uid has
    /// them; never another user's.
    func testAUsersAppsAreTheirOwn() {
        let h = harness()
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [Self.cgroup("app-gnome-org.example.Other-1.scope", uid: 1001, id: 51),
                                                          Self.cgroup("app-gnome-org.example.Run-1.scope", id: 52)])))
        let alice = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermd-settings", pid: 800)), "APPS")
        let apps = alice["apps"]?.arrayValue ?? []
        XCTAssertEqual(apps.map { $0["app"] }, ["org.example.Run", "org.example.Maps", "org.example.Mine", "org.example.Notes"])
        XCTAssertEqual(apps.map { $0["name"] }, [nil, "Alice's Maps", "Mine", "Notes"])
        XCTAssertEqual(apps.first?["enforced"], true)
        XCTAssertEqual(apps.last?["enforced_why"], "cgroup-absent", "installed, not running: nothing to enforce yet")
    }

    /// One user naming units after ever new IDs makes at most `maxOwnApps` apps of everyone's rules.
    func testOneUsersDesktopAppsAreBounded() {
        let h = harness()
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: (0..<300).map {
            Self.cgroup("app-gnome-org.example.A\($0)-1.scope", id: UInt64(100 + $0))
        } + [Self.cgroup(Self.mapsUnit, uid: 1001, id: 99)])))
        XCTAssertEqual(h.engine.state.config.apps.filter(\.discovered).count, Engine.maxOwnApps + 1)
        XCTAssertEqual(h.logged(containing: "uid 1000 runs more than 256 desktop apps").count, 1)
        XCTAssertNotNil(h.engine.state.config.app(named: "org.example.Maps"), "another user's app is still one")
    }

    // MARK: Desktop files

    func testADesktopFileIsRead() {
        let e = DesktopEntry.parse(Array("""
            # comment
            [Desktop Entry]
            Type=Application
            Name=Maps
            Name[de]=Karten
            Name[pt_BR]=Mapas
            Icon = org.example.Maps
            Exec=gnome-maps %U

            [Desktop Action new]
            Name=New window
            """.utf8))
        XCTAssertEqual(e?.name, "Maps")
        XCTAssertEqual(e?.icon, "org.example.Maps")
        XCTAssertEqual(e?.name(locale: "de_DE.UTF-8"), "Karten")
        XCTAssertEqual(e?.name(locale: "pt_BR"), "Mapas")
        XCTAssertEqual(e?.name(locale: "fr_FR"), "Maps")
        XCTAssertEqual(e?.name(locale: nil), "Maps", "the C locale's first")
    }

    /// A hostile file: not UTF-8, too large, not an application, a name with terminal escapes or too long.
    func testAHostileDesktopFile() {
        XCTAssertNil(DesktopEntry.parse([0x5B, 0xFF, 0xFE, 0x5D]))
        XCTAssertNil(DesktopEntry.parse(Array(("[Desktop Entry]\nName=x\n" + String(repeating: "#", count: 70000)).utf8)))
        XCTAssertNil(DesktopEntry.parse(Array("[Desktop Entry]\nType=Link\nName=x\n".utf8)))
        XCTAssertNil(DesktopEntry.parse(Array("Name=x\n[Desktop Entry]\n".utf8)), "keys before the group")
        XCTAssertNil(DesktopEntry.parse(Array("[Other]\nName=x\n".utf8)))
        let e = DesktopEntry.parse(Array("[Desktop Entry]\nName=\u{1B}[2J\u{1B}]0;pwned\u{07}Bank\\n\n".utf8))
        XCTAssertEqual(e?.name, "\\x1b[2J\\x1b]0;pwned\\x07Bank\\n")
        let long = DesktopEntry.parse(Array(("[Desktop Entry]\nName=" + String(repeating: "é", count: 500) + "\n").utf8))
        XCTAssertLessThanOrEqual(long?.name?.utf8.count ?? 0, DesktopEntry.maxNameBytes + 3)
        var many = "[Desktop Entry]\n"
        for i in 0..<1000 { many += "Name[l\(i)]=x\n" }
        XCTAssertEqual(DesktopEntry.parse(Array(many.utf8))?.localizedNames.count, DesktopEntry.maxLocales)
    }
}
