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
}
