// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// The one order of matching (AppResolver): every pair of kinds of match, each in both orders of definition, gives
/// the same app, and the rules' owner tables hold the process to what the resolver says they do.
final class AppResolverTests: XCTestCase {
    /// Kinds of match, strongest first; each an `[App]` section that names the peers below.
    private enum Kind: String, CaseIterable {
        case runScope, executable, unit, userUnit, desktop, user

        var section: String {
            switch self {
            // The run scope's app is named by the scope; its User= names someone else.
            case .runScope: return "[App org.npt.R]\nUser=4999\n"
            case .executable: return "[App exe]\nExecutable=/usr/bin/x\n"
            case .unit: return "[App unit]\nUnit=app-netpermd-*.scope\n"
            case .userUnit: return "[App userunit]\nUserUnit=app-netpermd-*.scope\n"
            case .desktop: return "[App desk]\nDesktopId=org.npt.R\n"
            case .user: return "[App user]\nUser=1000\n"
            }
        }

        var id: String {
            switch self {
            case .runScope: return "org.npt.R"
            case .executable: return "exe"
            case .unit: return "unit"
            case .userUnit: return "userunit"
            case .desktop: return "desk"
            case .user: return "user"
            }
        }
    }

    /// `app-netpermd-org.npt.R-1.scope` is a run scope of `org.npt.R`, matches `app-netpermd-*.scope` and is the
    /// desktop app `org.npt.R` (launcher `netpermd`) where it is a user's unit.
    private static let unit = "app-netpermd-org.npt.R-1.scope"
    private static let userOrder: [Kind] = [.runScope, .executable, .userUnit, .desktop, .user]
    private static let systemOrder: [Kind] = [.runScope, .executable, .unit, .user]

    private func peer(user: Bool) -> PeerIdentity {
        PeerIdentity(pid: 9, uid: 1000, gids: [1000], executable: "/usr/bin/x", unit: Self.unit, userUnit: user,
                     slice: user ? "app.slice" : "system.slice")
    }

    private func cgroup(user: Bool) -> UnitCgroup {
        user ? UnitCgroup(path: "user.slice/user-1000.slice/user@1000.service/app.slice/" + Self.unit, level: 5,
                          unit: Self.unit, id: 1, user: true)
             : UnitCgroup(path: "system.slice/" + Self.unit, level: 2, unit: Self.unit, id: 2)
    }

    private func config(_ kinds: [Kind]) throws -> Config {
        try parsePolicy("[Defaults]\nDesktopApps=no\n\n" + kinds.map(\.section).joined(separator: "\n"))
    }

    /// Every pair, both orders: the stronger kind wins, and the rules hold the process to the app the resolver says.
    func testEveryPairOfKindsInBothOrders() throws {
        for (order, user) in [(Self.userOrder, true), (Self.systemOrder, false)] {
            for (i, strong) in order.enumerated() {
                for weak in order[(i + 1)...] {
                    for kinds in [[strong, weak], [weak, strong]] {
                        let c = try config(kinds)
                        let p = peer(user: user)
                        let what = "\(kinds.map(\.rawValue)) for a \(user ? "user's" : "system") unit"
                        XCTAssertEqual(c.match(p).id, strong.id, what)
                        try assertRulesAgree(c, p, user: user, what)
                    }
                }
            }
        }
    }

    /// The scope the daemon gives a desktop app found by what it runs has a run scope's form: the app no `[App]`
    /// names is that desktop app (`matched_by: desktop`), not a run scope of the app the desktop files added.
    func testAScopeOfADesktopAppFoundByWhatItRunsIsThatDesktopApp() throws {
        let c = try parsePolicy("[Defaults]\nWWAN=ask\n").addingDesktopApps(["org.npt.R"])
        let m = c.match(peer(user: true))
        XCTAssertEqual(m.id, "org.npt.R")
        XCTAssertEqual(m.matchedBy, .desktop)
        try assertRulesAgree(c, peer(user: true), user: true, "a discovered desktop app's app-netpermd scope")
    }

    /// The same kind twice: the first defined wins.
    func testWithinAKindTheFirstDefinedWins() throws {
        let c = try parsePolicy("""
            [App b]
            UserUnit=app-netpermd-*.scope
            [App a]
            UserUnit=app-netpermd-org.npt.R-1.scope
            [App u2]
            User=1000
            [App u1]
            User=1000
            """)
        XCTAssertEqual(c.match(peer(user: true)).id, "b", "a glob defined first beats a literal name defined later")
        XCTAssertEqual(c.match(PeerIdentity(pid: 1, uid: 1000, gids: [], executable: nil, unit: nil)).id, "u2")
        try assertRulesAgree(c, peer(user: true), user: true, "two UserUnit= apps")
    }

    /// A unit inside another's cgroup: the enclosing unit's app, whatever kind matches the enclosing one and whatever
    /// kind the inner one, as the rules (which follow only the enclosing cgroup) have it.
    func testTheEnclosingUnitsAppBeatsTheInnerUnits() throws {
        let outer = "app-netpermd-org.npt.E-1.scope", inner = "app-netpermd-org.npt.O-2.scope"
        let outerSections = ["run": "[App org.npt.E]\nUser=4999\n", "userunit": "[App outer]\nUserUnit=\(outer)\n",
                             "desktop": "[App desk]\nDesktopId=org.npt.E\n"]
        let innerSections = ["run": "[App org.npt.O]\nUser=4998\n", "userunit": "[App inner]\nUserUnit=\(inner)\n"]
        let p = PeerIdentity(pid: 9, uid: 1000, gids: [1000], executable: "/usr/bin/x", unit: inner, userUnit: true,
                             unitFollowed: false, slice: nil, enclosing: (outer, "app.slice"))
        for (o, outerSection) in outerSections {
            for (i, innerSection) in innerSections {
                for text in [outerSection + "\n" + innerSection, innerSection + "\n" + outerSection] {
                    let c = try parsePolicy("[Defaults]\nDesktopApps=no\n\n" + text)
                    let r = c.resolve(p)
                    let expected = ["run": "org.npt.E", "userunit": "outer", "desktop": "desk"][o]!
                    XCTAssertEqual(r.match.id, expected, "enclosing \(o), inner \(i)")
                    XCTAssertEqual(r.identity.unit, outer, "seen in the unit the rules follow")
                    let held = c.resolver.resolve(p)
                    XCTAssertTrue(held.held, "the rules hold it to that app: enclosing \(o), inner \(i)")
                }
            }
        }
    }

    /// An `Executable=` app the rules cannot see: held only where its unit or uid is that app's too.
    func testAnExecutableMatchIsHeldOnlyWhereTheRulesNameTheSameApp() throws {
        let c = try parsePolicy("[App exe]\nExecutable=/usr/bin/x\nUser=1000\n\n[App unit]\nUserUnit=\(Self.unit)\n")
        XCTAssertFalse(c.resolver.resolve(peer(user: true)).held, "its unit is another app's")
        let outside = PeerIdentity(pid: 1, uid: 1000, gids: [], executable: "/usr/bin/x", unit: nil)
        XCTAssertTrue(c.resolver.resolve(outside).held, "its uid is the app's")
        var other = outside
        other.uid = 1001
        XCTAssertFalse(c.resolver.resolve(other).held, "another uid: the rules know nothing of it")
    }

    /// A user's unit only narrows: the uid's own `User=` app is the one the kernel asks too.
    func testAUsersUnitIsNarrowedByItsUidsApp() throws {
        let c = try parsePolicy("[App user]\nUser=1000\n\n[App unit]\nUserUnit=\(Self.unit)\n")
        let r = c.resolver.resolve(peer(user: true))
        XCTAssertEqual(r.app.map { c.apps[$0].id }, "unit")
        XCTAssertEqual(r.narrowingApp.map { c.apps[$0].id }, "user")
        XCTAssertNil(c.resolver.resolve(peer(user: false)).narrowingApp, "a system unit's verdict is its own")
    }

    /// The rules' owner tables (Ruleset.build) hold `p` to the app the resolver's `heldApp` names.
    private func assertRulesAgree(_ c: Config, _ p: PeerIdentity, user: Bool, _ what: String,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let r = Ruleset.build(apps: c.apps, permissions: { c.permissions(for: $0) }, links: [],
                              cgroups: UnitCgroups(nftRoot: "", units: [cgroup(user: user)]),
                              installed: c.installedDesktopApps)
        let kernel = r.unitOwners.first?.app ?? r.uidOwners[p.uid]
        let resolved = c.resolver.resolve(p)
        XCTAssertEqual(kernel, resolved.heldApp, "the rules' owner: \(what)", file: file, line: line)
        if resolved.matchedBy != .executable {
            XCTAssertTrue(resolved.held, "held to the app it is: \(what)", file: file, line: line)
        }
    }
}
