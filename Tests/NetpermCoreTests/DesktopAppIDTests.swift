// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// Desktop apps by the units desktops start them in (issue 32's first step): the ID as xdg-desktop-portal reads it,
/// and what is no app.
final class DesktopAppIDTests: XCTestCase {
    func testTheUnitsDesktopsMake() {
        let cases: [(String, String?)] = [
            ("app-gnome-org.gnome.Maps-4242.scope", "org.gnome.Maps"),
            ("app-flatpak-org.example.Notes-77.scope", "org.example.Notes"),
            ("app-gnome-org.example.Maps-1234.scope", "org.example.Maps"),
            ("app-org.kde.okular@9c2d.service", "org.kde.okular"),
            ("app-KDE-org.kde.dolphin-1234.scope", "org.kde.dolphin"),
            ("app-org.gnome.Epiphany.slice", nil),
            ("app-gnome-org.gnome.Epiphany-182352.slice", "org.gnome.Epiphany"),
            ("app-org.example.Tool.service", "org.example.Tool"),
            ("app-gnome-org.example.Tool-autostart.service", "org.example.Tool"),
            // An ID with '-' is escaped; the random part has none.
            ("app-gnome-org.gnome.Evolution\\x2dalarm\\x2dnotify-2437.scope", "org.gnome.Evolution-alarm-notify"),
            ("dbus-:1.2-org.gnome.Calculator@0.service", "org.gnome.Calculator"),
            ("dbus-:1.145-org.freedesktop.Tracker3.Miner.Files@12.service", "org.freedesktop.Tracker3.Miner.Files"),
        ]
        for (unit, id) in cases { XCTAssertEqual(DesktopAppID.from(unit: unit), id, unit) }
    }

    /// Not apps: a terminal's command, the desktop's own services, badly formed names and IDs.
    func testWhatIsNoApp() {
        for unit in ["vte-spawn-0f1e.scope", "app-org.gnome.Terminal.slice", "session.slice", "pipewire.service",
                     "xdg-desktop-portal.service", "org.gnome.Shell@wayland.service", "init.scope", "user@1000.service",
                     "app-not-a-well-formed-unit-name", "app-glib-spice\\x2dvdagent-1839.scope", "app-gnome-maps-12.scope",
                     "app-gnome-org.gnome.Maps-12!.scope", "app-gnome-9org.gnome.Maps-12.scope", "app-.scope", "app--1.scope",
                     "app-gnome-org..Maps-1.scope", "app-gnome-org.gnome.Maps\\x2-1.scope", "dbus-:1.2-notanid@0.service",
                     "dbus-:1.2-org.gnome.Calculator.service", "dbus-x-org.gnome.Calculator@0.service"] {
            XCTAssertNil(DesktopAppID.from(unit: unit), unit)
        }
        XCTAssertNil(DesktopAppID.from(unit: "app-gnome-org.example." + String(repeating: "a", count: 250) + "-1.scope"),
                     "longer than 255 bytes")
    }

    func testValidIDs() {
        for ok in ["org.gnome.Maps", "a.b", "org.example.My_App", "org.example.my-app", "io.github.x1"] {
            XCTAssertTrue(DesktopAppID.isValid(ok), ok)
        }
        for bad in ["maps", ".org.x", "org.x.", "org..x", "org.1x", "org.x y", "org.é.x", ""] {
            XCTAssertFalse(DesktopAppID.isValid(bad), bad)
        }
    }

    // MARK: IDs that are not reverse-DNS (issue 47)

    static let installed = InstalledDesktopApps(
        system: ["firefox-esr", "vlc", "gnome-vlc", "libreoffice-writer", "firefox_firefox", "kde4-okular"],
        users: [1001: ["mytool"]], deleted: [1002: ["firefox-esr"]])

    private func app(_ unit: String, uid: UInt32? = 1000, slice: String? = "app.slice") -> String? {
        DesktopAppID.from(unit: unit, slice: slice, uid: uid, installed: Self.installed)
    }

    /// Every launcher's form, escaped and not, for IDs installed for the unit's user.
    func testTheUnitsOfInstalledDebianApps() {
        let cases: [(String, String?)] = [
            // GNOME Shell escapes every byte outside [A-Za-z0-9:_.]: one reading only.
            ("app-gnome-firefox\\x2desr-4242.scope", "firefox-esr"),
            ("app-gnome-libreoffice\\x2dwriter-17.scope", "libreoffice-writer"),
            ("app-gnome-vlc-12.scope", "vlc"),
            // KDE: app-ID@UUID.service, app-ID-RANDOM.scope.
            ("app-vlc@0123456789abcdef0123456789abcdef.service", "vlc"),
            ("app-firefox\\x2desr-0123456789abcdef.scope", "firefox-esr"),
            ("app-kde4\\x2dokular@9c2d.service", "kde4-okular"),
            // uwsm, app2unit: app-DESKTOP-ID@RANDOM.service and app-DESKTOP-ID-RANDOM.scope.
            ("app-sway-firefox\\x2desr@8f3a2b1c.service", "firefox-esr"),
            ("app-Hyprland-vlc-8f3a2b1c.scope", "vlc"),
            ("app-niri-firefox\\x2desr-autostart.service", "firefox-esr"),
            // Unescaped dashes: the reading that is installed.
            ("app-firefox-esr-1234.scope", "firefox-esr"),
            // Snap: snap.SNAP.APP.UUID.scope, older snap.SNAP.APP-UUID.scope: SNAP_APP.
            ("snap.firefox.firefox.0b8bbf9a-8a5c-4b4e-9d6b-0c36f2d3c1aa.scope", "firefox_firefox"),
            ("snap.firefox.firefox-0b8bbf9a-8a5c-4b4e-9d6b-0c36f2d3c1aa.scope", "firefox_firefox"),
            // Reverse-DNS IDs are apps by their name, as before.
            ("app-gnome-org.gnome.Maps-4242.scope", "org.gnome.Maps"),
            ("snap.firefox.hook.configure-0b8bbf9a-8a5c-4b4e-9d6b-0c36f2d3c1aa.scope", nil),
            ("snap.firefox.firefox-0b8bbf9a.scope", nil),
            ("snap.firefox.firefox.0B8BBF9A-8A5C-4B4E-9D6B-0C36F2D3C1AA.scope", nil),
            ("snap.notinstalled.app-0b8bbf9a-8a5c-4b4e-9d6b-0c36f2d3c1aa.scope", nil),
            ("app-gnome-gimp-12.scope", nil),
            ("app-gnome-firefox\\x2desr-12!.scope", nil),
            ("app-gnome-firefox\\x40esr-12.scope", nil),
        ]
        for (unit, id) in cases { XCTAssertEqual(app(unit), id, unit) }
        XCTAssertEqual(app("app-gnome-vlc-12.scope"), "vlc", "both readings installed: after the launcher first")
        XCTAssertNil(app("app-gnome-firefox\\x2desr-4242.scope", slice: "session.slice"),
                     "the desktop's own units are never an app")
        XCTAssertNil(app("app-gnome-firefox\\x2desr-4242.scope", uid: nil), "no user: names alone")
        XCTAssertNil(DesktopAppID.from(unit: "app-gnome-firefox\\x2desr-4242.scope"), "names alone: reverse-DNS only")
    }

    /// A user's scope named after another user's own app, or an app they deleted for themselves, is no app.
    func testAUsersUnitNamedAfterAnothersApp() {
        XCTAssertEqual(app("app-gnome-mytool-1.scope", uid: 1001), "mytool")
        XCTAssertNil(app("app-gnome-mytool-1.scope", uid: 1000), "uid 1001's own entry is not uid 1000's")
        XCTAssertNil(app("app-gnome-firefox\\x2desr-1.scope", uid: 1002), "Hidden=true in their own file")
        XCTAssertEqual(app("app-gnome-firefox\\x2desr-1.scope", uid: 1003), "firefox-esr")
        // In the rules, the unit's user is read from its cgroup's path, not from its name.
        let config = try! parsePolicy("[Defaults]\nWWAN=deny\n").addingDesktopApps(["mytool"])
        var c = config
        c.installedDesktopApps = Self.installed
        let cgroups = UnitCgroups(nftRoot: "", units: [
            DesktopAppsTests.cgroup("app-gnome-mytool-1.scope", uid: 1000, id: 71),
            DesktopAppsTests.cgroup("app-gnome-mytool-2.scope", uid: 1001, id: 72),
        ])
        let r = Ruleset.build(apps: c.apps, permissions: { c.permissions(for: $0) }, links: [Links.lo, Links.wwan],
                              cgroups: cgroups, installed: c.installedDesktopApps)
        XCTAssertEqual(r.unitIDs, [72], "only uid 1001's scope is mytool")
    }

    func testDesktopFileIDs() {
        for ok in ["firefox-esr", "vlc", "libreoffice-writer", "firefox_firefox", "org.gnome.Maps", "display-im6.q16"] {
            XCTAssertTrue(DesktopAppID.isFileID(ok), ok)
        }
        for bad in ["", "0ad", "-x", ".x", "a b", "a@b", "caf\u{E9}", String(repeating: "a", count: 256)] {
            XCTAssertFalse(DesktopAppID.isFileID(bad), bad)
        }
        XCTAssertEqual(DesktopAppID.fileID(relativePath: ["kde4", "okular.desktop"]), "kde4-okular")
        XCTAssertEqual(DesktopAppID.fileID(relativePath: ["firefox-esr.desktop"]), "firefox-esr")
        XCTAssertNil(DesktopAppID.fileID(relativePath: [".desktop"]))
        XCTAssertNil(DesktopAppID.fileID(relativePath: ["x y.desktop"]))
    }
}
