// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
@testable import NetpermCore

/// The engine's steering machine on what the Steerer says (SteeringUpkeep), without a kernel: each input (a plan, a
/// kernel change, a step's outcome) and the step it hands out: install, sync or remove; what the maps are told;
/// which tables a sync reads; which outcomes the engine hears of; one step out at a time.
final class SteeringUpkeepTests: XCTestCase {
    let a = SteeringPlan.Allowance(bits: 1), b = SteeringPlan.Allowance(bits: 2)

    func plan(cgroups: [UInt64: UInt32], uids: [UInt32: UInt32], _ allowances: [SteeringPlan.Allowance]) -> SteeringPlan {
        SteeringPlan(cgroupMarks: cgroups, uidMarks: uids, allowances: allowances)
    }

    /// The step's action with its id and origin checked away.
    func action(_ step: SteeringStep?) -> String {
        switch step?.action {
        case nil: return "none"
        case .install?: return "install"
        case .sync?: return "sync"
        case .remove?: return "remove"
        }
    }

    func install(_ step: SteeringStep?, file: StaticString = #filePath, line: UInt = #line) -> SteeringInstall? {
        guard case let .install(i)? = step?.action else {
            XCTFail("not an install: \(String(describing: step))", file: file, line: line)
            return nil
        }
        return i
    }

    /// A plan is installed; until an install goes through, every kernel change installs it again; then it syncs.
    func testAFailedInstallIsTriedAgainByEveryChange() {
        var u = SteeringUpkeep()
        XCTAssertNil(u.follow(), "no plan: nothing to follow")
        let p = plan(cgroups: [1: a.mark], uids: [1000: b.mark], [a, b])
        let first = u.apply(p)
        XCTAssertEqual(first?.plan, p)
        XCTAssertEqual(action(first), "install")
        XCTAssertEqual(first?.follows, false)
        let e = EdgeError(.steer, errno: 1, "EPERM")
        XCTAssertEqual(u.answered(first!.id, SteeringOutcome(error: e)).heard, .answer(e), "the engine hears the answer to its plan")
        var step = u.follow()
        XCTAssertEqual(action(step), "install")
        XCTAssertEqual(step?.follows, true)
        XCTAssertEqual(u.answered(step!.id, SteeringOutcome(error: e)).heard, .change(.unchanged), "the same failure is not told again")
        step = u.follow()
        XCTAssertEqual(action(step), "install")
        XCTAssertEqual(u.answered(step!.id, .done(step!.action)).heard, .change(.recovered))
        step = u.follow()
        XCTAssertEqual(action(step), "sync", "installed: the tables follow the main table")
        XCTAssertEqual(step?.plan, p)
        XCTAssertEqual(u.answered(step!.id, .done(step!.action)).heard, .change(.unchanged))
        step = u.follow()
        let other = EdgeError(.steer, errno: 2, "ENOENT")
        XCTAssertEqual(u.answered(step!.id, SteeringOutcome(error: other)).heard, .change(.failed(other)))
        XCTAssertEqual(action(u.follow()), "install", "a sync that failed installs again")
        u = answered(u)
        step = u.apply(nil)
        XCTAssertEqual(action(step), "remove")
        XCTAssertEqual(u.answered(step!.id, .done(step!.action)).heard, .answer(nil))
        XCTAssertNil(u.follow())
    }

    /// Answers the step out as done.
    func answered(_ upkeep: SteeringUpkeep) -> SteeringUpkeep {
        var u = upkeep
        if let step = u.inFlight { _ = u.answered(step.id, .done(step.action)) }
        return u
    }

    /// The maps are told only what differs from what they hold, in key order; maps made anew hold nothing; the
    /// program is attached once.
    func testTheMapsAreToldOnlyWhatDiffers() throws {
        var u = SteeringUpkeep()
        let p1 = plan(cgroups: [3: a.mark, 1: a.mark], uids: [1000: a.mark], [a])
        var step = u.apply(p1)
        var i = try XCTUnwrap(install(step))
        XCTAssertTrue(i.makeMaps)
        XCTAssertTrue(i.attach)
        XCTAssertEqual(i.cgroups.update.map(\.key), [1, 3])
        XCTAssertEqual(i.uids.update.map(\.key), [1000])
        _ = u.answered(step!.id, .done(step!.action))
        let p2 = plan(cgroups: [1: b.mark, 2: a.mark], uids: [1000: a.mark], [a, b])
        step = u.apply(p2)
        i = try XCTUnwrap(install(step))
        XCTAssertFalse(i.makeMaps)
        XCTAssertFalse(i.attach, "attached already")
        XCTAssertEqual(i.cgroups.update.map(\.key), [1, 2])
        XCTAssertEqual(i.cgroups.update.map(\.mark), [b.mark, a.mark])
        XCTAssertEqual(i.cgroups.delete, [3])
        XCTAssertEqual(i.uids.update.count + i.uids.delete.count, 0)
        // The maps were made anew but nothing was written: the next install tells them everything.
        _ = u.answered(step!.id, SteeringOutcome(error: EdgeError(.steer, errno: 12, "ENOMEM"), mapsMade: true))
        i = try XCTUnwrap(install(u.follow()))
        XCTAssertFalse(i.makeMaps)
        XCTAssertEqual(i.cgroups.update.count, 2, "new maps are told everything")
        XCTAssertEqual(i.cgroups.delete, [])
        _ = u.answered(u.inFlight!.id, SteeringOutcome(error: EdgeError(.steer, errno: 12, "ENOMEM"), cgroupsWritten: true))
        XCTAssertEqual(u.written.cgroups, p2.cgroupMarks)
        XCTAssertEqual(u.written.uids, [:], "the uids' map was not written")
        u = answered(u)
        step = u.apply(nil)
        _ = u.answered(step!.id, SteeringOutcome(error: EdgeError(.steer, errno: 1, "EPERM")))
        XCTAssertEqual(u.written, SteeringUpkeep.Marks(), "removed: the maps go with the program")
        i = try XCTUnwrap(install(u.apply(p1)))
        XCTAssertTrue(i.makeMaps, "removed, though it failed: the maps are made again")
        XCTAssertTrue(i.attach)
    }

    /// Every table is read first and for a removal; after a full sync, only steering's own and the plan's.
    func testWhichTablesASyncReads() throws {
        var u = SteeringUpkeep()
        let p1 = plan(cgroups: [:], uids: [1000: a.mark], [a])
        var step = u.apply(p1)
        XCTAssertNil(try XCTUnwrap(install(step)).read, "the first time: every table")
        _ = u.answered(step!.id, SteeringOutcome(error: EdgeError(.steer, errno: 1, "EPERM"), mapsMade: true,
                                                 cgroupsWritten: true, uidsWritten: true, attached: true))
        step = u.follow()
        XCTAssertNil(try XCTUnwrap(install(step)).read, "additions alone: every table again")
        _ = u.answered(step!.id, .done(step!.action))
        step = u.follow()
        guard case let .sync(_, read)? = step?.action else { return XCTFail("\(String(describing: step))") }
        XCTAssertEqual(read, [a.table])
        _ = u.answered(step!.id, .done(step!.action))
        let p2 = plan(cgroups: [:], uids: [1000: b.mark], [b])
        step = u.apply(p2)
        XCTAssertEqual(try XCTUnwrap(install(step)).read, [a.table, b.table], "tables a plan used stay looked at")
        _ = u.answered(step!.id, .done(step!.action))
        step = u.apply(nil)
        XCTAssertEqual(step?.action, .remove, "a removal reads every table")
        _ = u.answered(step!.id, .done(step!.action))
        XCTAssertNil(try XCTUnwrap(install(u.apply(p2))).read, "after a removal, every table again")
    }

    /// One step out at a time: a plan and a kernel change that come meanwhile wait for its answer, then the latest
    /// plan goes, then the sync; an answer to another step is no answer.
    func testOneStepAtATime() throws {
        var u = SteeringUpkeep()
        let p1 = plan(cgroups: [:], uids: [1000: a.mark], [a])
        let p2 = plan(cgroups: [:], uids: [1000: b.mark], [b])
        let p3 = plan(cgroups: [:], uids: [1001: b.mark], [b])
        let first = try XCTUnwrap(u.apply(p1))
        XCTAssertNil(u.follow(), "a step is out")
        XCTAssertNil(u.apply(p2))
        XCTAssertNil(u.apply(p3), "the latest plan waits")
        let stale = u.answered(first.id &+ 7, .done(first.action))
        XCTAssertNil(stale.heard)
        XCTAssertNil(stale.next)
        let (heard, next) = u.answered(first.id, .done(first.action))
        XCTAssertEqual(heard, .answer(nil))
        XCTAssertEqual(next?.plan, p3)
        XCTAssertEqual(next?.follows, false)
        let i = try XCTUnwrap(install(next))
        XCTAssertEqual(i.uids.update.map(\.key), [1001])
        XCTAssertEqual(i.uids.delete, [1000], "decided from what p1's step wrote")
        let then = u.answered(next!.id, .done(next!.action))
        XCTAssertEqual(action(then.next), "sync", "the kernel change is followed last")
        XCTAssertEqual(then.next?.follows, true)
        XCTAssertGreaterThan(then.next!.id, next!.id)
        XCTAssertNil(u.answered(then.next!.id, .done(then.next!.action)).next)
    }
}
