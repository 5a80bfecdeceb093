// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// `netpermctl run --app NAME`'s scope name: escaped as systemd escapes, read back only in the form systemd would
/// write, and matched to app NAME ahead of every other key.
final class RunScopeTests: XCTestCase {
    func testNamesAreEscapedAsSystemdDoes() {
        XCTAssertEqual(RunScope.unitName(app: "maps", tag: "1234_9f"), "app-netpermd-maps-1234_9f.scope")
        XCTAssertEqual(RunScope.unitName(app: "org.gnome-Maps_2", tag: "7"), #"app-netpermd-org.gnome\x2dMaps_2-7.scope"#)
        XCTAssertNil(RunScope.unitName(app: "1maps", tag: "7"), "not an app id")
        XCTAssertNil(RunScope.unitName(app: "maps", tag: "7-8"), "a tag has no dash")
        XCTAssertNil(RunScope.unitName(app: "a" + String(repeating: "-", count: 70), tag: "7"), "longer than 255")
    }

    func testNamesAreReadBack() {
        for app in ["maps", "org.gnome.Maps", "my-app", "a-b-c_d.e", "X"] {
            let unit = RunScope.unitName(app: app, tag: "42_abc")!
            XCTAssertEqual(RunScope.app(fromUnit: unit), app, unit)
        }
        for other in ["app-gnome-firefox-1234.scope", "app-netpermd-maps.scope", "app-netpermd--1.scope",
                      "app-netpermd-maps-.scope", "app-netpermd-maps-1.service", "app-netpermd-my-app-1.scope",
                      #"app-netpermd-my\x2Dapp-1.scope"#, #"app-netpermd-m\x61ps-1.scope"#, #"app-netpermd-a\x2-1.scope"#,
                      "app-netpermd-1maps-1.scope", "app-netpermd-maps-1 2.scope", "run-u12.scope"] {
            XCTAssertNil(RunScope.app(fromUnit: other), other)
        }
    }

    /// The scope is its app whatever that app's keys, ahead of an executable match (the kernel cannot see
    /// executables, and the daemon's answer must be the kernel's), for the system's and users' managers alike; a
    /// scope naming no app of the policy is matched as if it were any other unit.
    func testTheScopeIsItsAppWhateverElseMatches() throws {
        let config = try parsePolicy("""
            [App browser]
            Executable=/usr/bin/curl
            [App tool]
            Executable=/usr/bin/tool
            [App bob]
            User=1000
            """)
        for user in [false, true] {
            let peer = PeerIdentity(pid: 5, uid: 1000, gids: [1000], executable: "/usr/bin/curl",
                                    unit: RunScope.unitName(app: "tool", tag: "5"), userUnit: user)
            XCTAssertEqual(config.match(peer).id, "tool")
            XCTAssertEqual(config.match(peer).matchedBy, .unit)
            let unknown = PeerIdentity(pid: 5, uid: 1000, gids: [1000], executable: "/usr/bin/curl",
                                       unit: RunScope.unitName(app: "nosuch", tag: "5"), userUnit: user)
            XCTAssertEqual(config.match(unknown).id, "browser")
        }
    }
}
