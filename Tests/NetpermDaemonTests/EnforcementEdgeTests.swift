// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermDaemon
import NetpermIO
import NetpermProtocol
import TestSupport
import XCTest

/// Enforcement through the interpreter, on the test loop with a fake rules edge (DaemonBed): a transaction the
/// kernel refuses, a repair after another tool's flush that fails and is retried by the loop's timer, and a unit
/// cgroup that goes while its rules are being loaded. What clients hear is checked beside what was loaded.
final class EnforcementEdgeTests: XCTestCase {
    static let policy = """
    [Enforcement]
    Mode=block

    [Interface wwan*]
    Kind=wwan

    [App updater]
    User=4242
    WWAN=deny

    [App cron]
    Unit=cron.service
    WWAN=deny
    """
    static let wwan = LinkFacts(index: 3, name: "wwan0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                                operstate: "up")
    static let refused = EdgeError(.loadRules, errno: ENOENT, "Could not process rule: No such file or directory")

    private func bed() throws -> DaemonBed {
        let b = try DaemonBed(policy: Self.policy)
        addTeardownBlock { b.close() }
        return b
    }

    private func state(_ b: DaemonBed, _ c: Int32) throws -> JSON? { try b.request(c, "STATUS")["enforcement"]?["state"] }

    /// A change of only what differs that the kernel refuses is followed at once by the whole table; clients hear
    /// `enforcing` throughout (the transactions that went through reject what both sides reject).
    func testARefusedTransactionLoadsTheWholeTable() throws {
        let b = try bed()
        XCTAssertEqual(b.rules.loaded.count, 1, "the whole table at start-up")
        let whole = b.rules.loaded[0]
        b.rules.answers = [Self.refused]
        b.setLinks([DaemonBed.eth, Self.wwan])
        XCTAssertEqual(b.rules.loaded.count, 3, "\(b.rules.loaded)")
        XCTAssertTrue(b.rules.loaded[1].joined().hasPrefix("flush map inet netpermd links\n"), "first only what differs")
        XCTAssertTrue(b.rules.loaded[1].joined().contains("\"wwan0\" : goto metered_wwan"), "\(b.rules.loaded[1])")
        XCTAssertEqual(b.rules.loaded[2].count, 1, "then the whole table")
        XCTAssertNotEqual(b.rules.loaded[2], whole)
        XCTAssertTrue(b.rules.loaded[2][0].contains("\"wwan0\" : goto metered_wwan"))
        XCTAssertEqual(b.logged("changing only what differs failed (\(Self.refused)); loading the whole table").count, 1)
        let c = try b.connect()
        XCTAssertEqual(try state(b, c), "enforcing")
        XCTAssertEqual(try b.request(c, "QUERY updater")["enforced"], true)
    }

    /// Another tool flushed the ruleset and the edge's own repair failed: the verdicts say so at once, and the
    /// loop's timer tries the whole table again a second later.
    func testARepairAfterAForeignFlushThatFailsIsRetried() throws {
        let b = try bed()
        let c = try b.connect()
        XCTAssertEqual(try state(b, c), "enforcing")
        let loads = b.rules.loaded.count
        let runs = b.rules.runs.count
        b.rules.answers = [EdgeError(.loadRules, errno: EPERM, "Operation not permitted")]
        b.rules.changed(TablesChange(usage: false, at: 1, by: .process(pid: 4242, name: "nft")))
        XCTAssertEqual(b.logged("pid 4242 (nft) changed table inet netpermd; loading the rules again").count, 1)
        XCTAssertEqual(b.rules.runs.count, runs + 1, "the engine's repair ran")
        XCTAssertEqual(b.rules.runs.last?.scripts.count, 3, "the rules in force, whole, through the handover")
        XCTAssertEqual(b.rules.loaded.count, loads, "no load of the engine's asked for")
        XCTAssertEqual(b.logged("loading the rules again failed").count, 1)
        XCTAssertEqual(try state(b, c), "failed")
        XCTAssertEqual(try b.request(c, "QUERY updater")["enforced_why"], "rules-failed")
        b.loop.advance(byMicroseconds: 999_999)
        XCTAssertEqual(b.rules.loaded.count, loads, "not before its second")
        b.loop.advance(byMicroseconds: 1)
        XCTAssertEqual(b.rules.loaded.count, loads + 1)
        XCTAssertEqual(b.rules.loaded.last, [b.rules.loaded[loads - 1].joined()], "the rules in force, whole")
        XCTAssertEqual(try state(b, c), "enforcing")
        XCTAssertEqual(try b.request(c, "QUERY updater")["enforced"], true)
    }

    /// cron's cgroup goes while the rules that name it are loaded: the kernel refuses its path, and the cgroups
    /// scanned meanwhile are handled after that load's effects, never inside them. The rules end without it, in
    /// force, with no retry left behind.
    func testACgroupThatGoesMidLoad() throws {
        let b = try bed()
        let cron = UnitCgroups(nftRoot: "unified", units: [
            UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: 7),
        ])
        b.interpreter.feed(.cgroups(cron))
        XCTAssertTrue(b.rules.loaded.last?.joined().contains("unified/system.slice/cron.service") ?? false,
                      "\(b.rules.loaded.last ?? [])")
        let c = try b.connect()
        XCTAssertEqual(try state(b, c), "enforcing")
        // A second cron cgroup (restarted: a new id) comes; while its rules load, it goes too.
        let restarted = UnitCgroups(nftRoot: "unified", units: [
            UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: 8),
        ])
        // From the first load on, the kernel refuses whatever names the cgroup's path.
        var gone = false
        b.rules.during = { [unowned b] scripts in
            if !gone {
                gone = true
                b.interpreter.feed(.cgroups(UnitCgroups(nftRoot: "unified")))
            }
            return scripts.joined().contains("cron.service") ? Self.refused : nil
        }
        let before = b.rules.loaded.count
        b.interpreter.feed(.cgroups(restarted))
        XCTAssertGreaterThan(b.rules.loaded.count, before + 1, "\(b.rules.loaded.dropFirst(before))")
        XCTAssertFalse(b.rules.loaded.last!.joined().contains("cron.service"), "the last load names no cron cgroup")
        XCTAssertEqual(try state(b, c), "enforcing")
        let loads = b.rules.loaded.count
        b.loop.advance(byMicroseconds: 60_000_000)
        XCTAssertEqual(b.rules.loaded.count, loads, "no retry left behind")
        XCTAssertEqual(try state(b, c), "enforcing")
    }
}
