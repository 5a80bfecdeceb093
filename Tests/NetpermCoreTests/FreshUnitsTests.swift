// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermProtocol
import XCTest

/// Units named to the kernel as they are made (issue 37): how the engine tells the edge to name them
/// (`UnitNaming`), what it keeps of those named (Engine+FreshUnits.swift), and how the scans' loads take them over.
final class FreshUnitsTests: XCTestCase {
    private let policy = """
        [Enforcement]
        Mode=block
        [App churn]
        Unit=churn-*.scope
        WWAN=deny
        WiFi=ask
        [App denied]
        User=4001
        WWAN=deny
        """

    private func unit(_ name: String, id: UInt64, level: Int = 2, handle: Int32? = nil) -> UnitCgroup {
        UnitCgroup(path: (level == 2 ? "a.slice/" : "a.slice/b.slice/") + name, level: level, unit: name, id: id, handle: handle)
    }

    /// In force with one unit of `churn` at level 2, so that its maps are looked up.
    private func enforcing() -> EngineHarness {
        let h = EngineHarness(policy: policy, links: [Links.lo, Links.wwan])
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [unit("churn-1.scope", id: 1, handle: 501)])))
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["state"], "enforcing")
        return h
    }

    private func status(_ h: EngineHarness, _ key: String) -> JSON? { h.request(h.connect(), "STATUS")["enforcement"]?[key] }

    /// What a unit just made is named with: only what its app must not do (a denial, an undecided `ask`'s chain),
    /// in the maps the rules in force look up; nothing where they could not hold it by elements alone.
    func testANamingTakesAwayWhatTheRulesWould() throws {
        let h = enforcing()
        let naming = try XCTUnwrap(h.namings.last ?? nil)
        let restrictions = try XCTUnwrap(naming.restrictions(of: unit("churn-9.scope", id: 9)))
        XCTAssertEqual(restrictions.map(\.map), ["unit2_wifi", "unit2_wwan"])
        XCTAssertEqual(restrictions.last?.value, .goto("deny"))
        guard case let .goto(chain)? = restrictions.first?.value else { return XCTFail("\(restrictions)") }
        XCTAssertTrue(chain.hasPrefix("ask_") && chain.hasSuffix("_wifi"), "the pending kind's chain: \(chain)")
        XCTAssertEqual(naming.elements(of: unit("churn-9.scope", id: 9))?.count, 7, "every kind, metered, roaming and its tag, as the rules")
        XCTAssertNil(naming.restrictions(of: unit("other.scope", id: 9)), "no app owns it")
        XCTAssertNil(naming.restrictions(of: unit("churn-9.scope", id: 9, level: 3)), "a level no lookup is at: its scan")
        // Permissions change: the next naming gives what they give now.
        XCTAssertEqual(h.request(h.connect(), "DECIDE churn wifi allow")["ok"], true)
        XCTAssertEqual((h.namings.last ?? nil)?.restrictions(of: unit("churn-9.scope", id: 9)).map { $0.map(\.map) },
                       ["unit2_wwan"], "wifi decided: only the policy's denial left")
    }

    /// A unit the edge named is counted apart (its restrictions only are in force: not yet `enforced`), and when a
    /// scan begun after it says it went, its elements go by its id.
    func testANamedUnitIsCountedApartAndGoesByItsID() throws {
        let h = enforcing()
        let naming = try XCTUnwrap(h.namings.last ?? nil)
        let x = unit("churn-9.scope", id: 9)
        let named = NamedUnit(unit: x, elements: try XCTUnwrap(naming.restrictions(of: x)))
        h.feed(.unitsNamed([named], generation: naming.generation, error: nil))
        XCTAssertEqual(status(h, "units_restricted"), 1)
        XCTAssertEqual(status(h, "unit_cgroups"), 1, "the rules' own: the unit the scan found")
        let inside = h.connect(makePeer(uid: 0, exe: "/usr/bin/tool", unit: "churn-9.scope", pid: 9))
        XCTAssertEqual(h.request(inside, "QUERY")["enforced_why"], "cgroup-pending", "its allows come with its load")
        XCTAssertTrue(h.unitChanges.isEmpty, "named with this naming: nothing to do again")
        h.feed(.unitsGone([9]))
        XCTAssertEqual(h.unitChanges.last, ElementChanges(commands: [.delete(map: "unit2_wifi", keys: [.cgroupID(9)]),
                                                                    .delete(map: "unit2_wwan", keys: [.cgroupID(9)])]))
        XCTAssertEqual(status(h, "units_restricted"), 0)
        // Refused by the kernel: left to the scan, counted nowhere.
        h.feed(.unitsNamed([NamedUnit(unit: unit("churn-10.scope", id: 10), elements: named.elements)],
                           generation: naming.generation, error: EdgeError(.nameUnits, errno: ENOENT, "Could not process rule: No such file or directory")))
        XCTAssertEqual(status(h, "units_restricted"), 0)
    }

    /// A scan that finds a named unit: its load adds only what the kernel lacks (not the restrictions again), and
    /// once it took, the unit is the rules' (its elements go with the rules' next change when it goes, not by id).
    func testAScanTakesANamedUnitOver() throws {
        let h = enforcing()
        let naming = try XCTUnwrap(h.namings.last ?? nil)
        let x = unit("churn-9.scope", id: 9, handle: 509)
        h.feed(.unitsNamed([NamedUnit(unit: x, elements: try XCTUnwrap(naming.restrictions(of: x)))],
                           generation: naming.generation, error: nil))
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [unit("churn-1.scope", id: 1, handle: 501), x])))
        let script = try XCTUnwrap(h.transactionLists.last).joined()
        XCTAssertTrue(script.contains(#"add element inet netpermd unit2_ethernet { "../../../proc/self/fd/509" : accept }"#), script)
        XCTAssertFalse(script.contains("unit2_wwan"), "its denial is there already: \(script)")
        XCTAssertEqual(status(h, "units_restricted"), 0)
        XCTAssertEqual(status(h, "unit_cgroups"), 2)
        let changes = h.unitChanges.count
        h.feed(.unitsGone([9]))
        XCTAssertEqual(h.unitChanges.count, changes, "the rules name it: theirs to delete")
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [unit("churn-1.scope", id: 1, handle: 501)])))
        XCTAssertTrue(try XCTUnwrap(h.transactionLists.last).joined()
            .contains(#"delete element inet netpermd unit2_wwan { "../../../proc/self/fd/509" }"#),
                      "gone: deleted through the descriptor the daemon holds, not left stale")
    }

    /// A load of the whole table replaces the maps: the units named as they were made that it does not name are
    /// named again; and a naming older than that load is named again when its answer comes after it.
    func testAWholeLoadNamesTheNamedAgain() throws {
        let h = enforcing()
        let naming = try XCTUnwrap(h.namings.last ?? nil)
        let x = unit("churn-9.scope", id: 9)
        let named = NamedUnit(unit: x, elements: try XCTUnwrap(naming.restrictions(of: x)))
        h.feed(.unitsNamed([named], generation: naming.generation, error: nil))
        // A change refused: the whole table, which takes.
        h.rulesAnswers = [EdgeError(.loadRules, errno: ENOENT, "Could not process rule: No such file or directory"), nil]
        h.feed(.cgroups(UnitCgroups(nftRoot: "", units: [unit("churn-1.scope", id: 1, handle: 501),
                                                         unit("churn-2.scope", id: 2, handle: 502)])))
        XCTAssertEqual(h.steps.filter { $0.hasSuffix("-rules") }.suffix(2), ["update-rules", "load-rules"])
        XCTAssertEqual(h.unitChanges.last, ElementChanges(commands: [.add(map: "unit2_wifi", elements: [.init(key: .cgroupID(9), value: named.elements[0].value)]),
                                                                    .add(map: "unit2_wwan", elements: [.init(key: .cgroupID(9), value: .goto("deny"))])]))
        let count = h.unitChanges.count
        // Named before that load with the older naming, heard only after it: named again.
        let y = unit("churn-10.scope", id: 10)
        h.feed(.unitsNamed([NamedUnit(unit: y, elements: named.elements)], generation: naming.generation, error: nil))
        XCTAssertEqual(h.unitChanges.count, count + 1)
        XCTAssertEqual(status(h, "units_restricted"), 2)
    }

    /// After a change of permissions, units named as they were made get what the permissions give now: a pending
    /// kind decided is no longer taken away in the kernel at once, not only once their scan's load comes.
    func testAChangeOfPermissionsRenamesTheNamed() throws {
        let h = enforcing()
        let naming = try XCTUnwrap(h.namings.last ?? nil)
        let x = unit("churn-9.scope", id: 9)
        h.feed(.unitsNamed([NamedUnit(unit: x, elements: try XCTUnwrap(naming.restrictions(of: x)))],
                           generation: naming.generation, error: nil))
        XCTAssertEqual(h.request(h.connect(), "DECIDE churn wifi allow")["ok"], true)
        XCTAssertEqual(h.unitChanges.last?.commands.first, .delete(map: "unit2_wifi", keys: [.cgroupID(9)]), "\(h.unitChanges)")
        XCTAssertEqual(status(h, "units_restricted"), 1, "its denial of wwan stays")
    }
}
