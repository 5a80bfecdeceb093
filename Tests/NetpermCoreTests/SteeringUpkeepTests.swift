// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
@testable import NetpermCore

/// What the Steerer decides (SteeringUpkeep), without a kernel: install, sync or remove; what the maps are told;
/// which tables a sync reads; which outcomes the engine hears of.
final class SteeringUpkeepTests: XCTestCase {
    let a = SteeringPlan.Allowance(bits: 1), b = SteeringPlan.Allowance(bits: 2)

    func plan(cgroups: [UInt64: UInt32], uids: [UInt32: UInt32], _ allowances: [SteeringPlan.Allowance]) -> SteeringPlan {
        SteeringPlan(cgroupMarks: cgroups, uidMarks: uids, allowances: allowances)
    }

    /// A plan is installed; until an install goes through, every kernel change installs it again; then it syncs.
    func testAFailedInstallIsTriedAgainByEveryChange() {
        var u = SteeringUpkeep()
        XCTAssertNil(u.follow(), "no plan: nothing to follow")
        let p = plan(cgroups: [1: a.mark], uids: [1000: b.mark], [a, b])
        XCTAssertEqual(u.apply(p), .install(p))
        let e = EdgeError(.steer, errno: 1, "EPERM")
        XCTAssertEqual(u.applied(e), e, "the engine hears the answer to its plan")
        XCTAssertEqual(u.follow(), .install(p))
        XCTAssertEqual(u.followed(e), .unchanged, "the same failure is not told again")
        XCTAssertEqual(u.follow(), .install(p))
        XCTAssertEqual(u.followed(nil), .recovered)
        XCTAssertEqual(u.follow(), .sync(p), "installed: the tables follow the main table")
        XCTAssertEqual(u.followed(nil), .unchanged)
        let other = EdgeError(.steer, errno: 2, "ENOENT")
        XCTAssertEqual(u.followed(other), .failed(other))
        XCTAssertEqual(u.follow(), .install(p), "a sync that failed installs again")
        XCTAssertEqual(u.apply(nil), .remove)
        XCTAssertNil(u.applied(nil))
        XCTAssertNil(u.follow())
    }

    /// The maps are told only what differs from what they hold, in key order; maps made anew hold nothing.
    func testTheMapsAreToldOnlyWhatDiffers() {
        var u = SteeringUpkeep()
        let p1 = plan(cgroups: [3: a.mark, 1: a.mark], uids: [1000: a.mark], [a])
        _ = u.apply(p1)
        var (c, i) = u.mapChanges(p1)
        XCTAssertEqual(c.update.map(\.key), [1, 3])
        XCTAssertEqual(i.update.map(\.key), [1000])
        u.wroteCgroups(p1)
        u.wroteUIDs(p1)
        let p2 = plan(cgroups: [1: b.mark, 2: a.mark], uids: [1000: a.mark], [a, b])
        (c, i) = u.mapChanges(p2)
        XCTAssertEqual(c.update.map(\.key), [1, 2])
        XCTAssertEqual(c.update.map(\.mark), [b.mark, a.mark])
        XCTAssertEqual(c.delete, [3])
        XCTAssertEqual(i.update.count + i.delete.count, 0)
        u.mapsMade()
        XCTAssertEqual(u.mapChanges(p2).cgroups.update.count, 2, "new maps are told everything")
        u.wroteCgroups(p2)
        _ = u.apply(nil)
        XCTAssertEqual(u.written, SteeringUpkeep.Marks(), "removed: the maps go with the program")
    }

    /// Every table is read first and for a removal; after a full sync, only steering's own and the plan's.
    func testWhichTablesASyncReads() {
        var u = SteeringUpkeep()
        let p1 = plan(cgroups: [:], uids: [1000: a.mark], [a])
        XCTAssertNil(u.tablesToRead(p1), "the first time: every table")
        u.synced(p1, addsOnly: true)
        XCTAssertNil(u.tablesToRead(p1), "additions alone: every table again")
        u.synced(p1, addsOnly: false)
        XCTAssertEqual(u.tablesToRead(p1), [a.table])
        let p2 = plan(cgroups: [:], uids: [1000: b.mark], [b])
        XCTAssertEqual(u.tablesToRead(p2), [a.table, b.table], "tables a plan used stay looked at")
        XCTAssertNil(u.tablesToRead(nil), "a removal reads every table")
        u.synced(nil, addsOnly: false)
        XCTAssertNil(u.tablesToRead(p2), "after a removal, every table again")
    }
}
