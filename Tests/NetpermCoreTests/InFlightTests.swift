// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// One job in flight, one more coalesced after it: the waiters of each are answered by it, never by the job that
/// was already away when they asked.
final class InFlightTests: XCTestCase {
    func testAskedWhileOneRunsIsTheNextOnesAndCoalesced() {
        var f = InFlight<Int>()
        XCTAssertTrue(f.request(1), "nothing runs: start")
        XCTAssertFalse(f.request(2), "one runs: after it")
        XCTAssertFalse(f.request(3))
        XCTAssertFalse(f.start(), "a start without a waiter is coalesced too")
        XCTAssertEqual(f.waiters, [1])
        XCTAssertEqual(f.nextWaiters, [2, 3])
        let first = f.finish()
        XCTAssertEqual(first.waiters, [1])
        XCTAssertTrue(first.again)
        XCTAssertFalse(f.running, "the caller starts the next")
        XCTAssertEqual(f.waiters, [2, 3], "its waiters are the next job's")
        XCTAssertTrue(f.start())
        let second = f.finish()
        XCTAssertEqual(second.waiters, [2, 3])
        XCTAssertFalse(second.again)
        XCTAssertFalse(f.running)
        XCTAssertEqual(f.finish().waiters, [], "an answer nobody asked for answers nobody")
    }

    func testGoneWaitersAreAnsweredByNothing() {
        var f = InFlight<Int>()
        _ = f.request(1)
        _ = f.request(2)
        f.removeWaiters { $0 == 1 || $0 == 2 }
        XCTAssertEqual(f.finish().waiters, [])
        XCTAssertEqual(f.waiters, [])
        f.reset()
        XCTAssertFalse(f.running)
    }

    /// Rule loads: a reply waits for the load that carries what is asked now, the one away unless the state already
    /// asks for another; a wish withdrawn (the state came back to what is away) leaves the next job's waiters to be
    /// answered when nothing more starts.
    func testWaitingForWhatCarriesTheAskNow() {
        var f = InFlight<Int>()
        XCTAssertTrue(f.start())
        f.wait(1)
        f.want(true)
        f.wait(2)
        XCTAssertTrue(f.contains { $0 == 2 })
        f.want(false)
        f.wait(3)
        XCTAssertEqual(f.waiters, [1, 3], "no other job wanted: the one away carries it")
        XCTAssertEqual(f.nextWaiters, [2])
        let done = f.finish()
        XCTAssertEqual(done.waiters, [1, 3])
        XCTAssertFalse(done.again)
        XCTAssertEqual(f.drain(), [2], "nothing started: what waited for the next goes now")
        f.want(true)
        XCTAssertEqual(f.phase, .idle, "nothing away: nothing to want after it")
    }

    /// Each change of phase is one log line, old -> new.
    func testPhasesAreLoggedOldToNew() {
        var f = InFlight<Int>()
        var lines: [String] = []
        XCTAssertTrue(f.logged("loads", log: { lines.append($0) }) { $0.request(1) })
        XCTAssertFalse(f.logged("loads", log: { lines.append($0) }) { $0.request(2) })
        XCTAssertFalse(f.logged("loads", log: { lines.append($0) }) { $0.request(3) })
        _ = f.logged("loads", log: { lines.append($0) }) { $0.finish() }
        XCTAssertEqual(lines, ["loads: idle -> running", "loads: running -> running, another asked for",
                               "loads: running, another asked for -> idle"])
    }
}

/// Decision writes: one away, the requests that come meanwhile queued in order and taken one at a time once it
/// has answered; a requester that leaves gets nothing, its decision stands.
final class DecisionCommitsTests: XCTestCase {
    private func store(_ id: ConnectionID?) -> PendingStore {
        PendingStore(requester: id, change: { _ in }, apply: {}, reply: {}, failed: {})
    }

    func testOneWriteAwayAndTheQueueInOrder() throws {
        var c = DecisionCommits()
        var lines: [String] = []
        let log = { (l: String) in lines.append(l) }
        XCTAssertFalse(c.writing)
        XCTAssertNil(c.next())
        c.begin(store(1), log: log)
        XCTAssertEqual(c.phase, .writing(requester: 1))
        let decide = try XCTUnwrap(RequestParser.parse(Array("DECIDE maps wwan allow".utf8))).get()
        c.enqueue(2, decide)
        c.enqueue(3, decide)
        XCTAssertNil(c.next(), "nothing is taken while a write is away")
        c.forget(2, log: log)
        c.forget(1, log: log)
        XCTAssertEqual(c.phase, .writing(requester: nil), "its requester left: the write stands, answering nobody")
        let done = try XCTUnwrap(c.finish(log: log))
        XCTAssertNil(done.requester)
        XCTAssertEqual(c.phase, .idle)
        XCTAssertEqual(c.next()?.0, 3, "the one that stayed")
        XCTAssertNil(c.next())
        XCTAssertNil(c.finish(log: log), "no write away: no outcome")
        XCTAssertEqual(lines, ["decisions: idle -> writing", "decisions: writing -> idle"],
                       "a requester leaving is no change of phase's name")
    }
}

/// Steering's phase: changed through one setter, each change of its name logged once.
final class SteeringMachineTests: XCTestCase {
    func testPhasesAndTheirLog() {
        var m = SteeringMachine()
        var lines: [String] = []
        let plan = SteeringPlan.build(ruleset: Ruleset.build(apps: [], permissions: { _ in PermissionSet.builtIn }, links: [],
                                                             cgroups: UnitCgroups()),
                                      apps: [], permissions: { _ in PermissionSet.builtIn }, links: [])
        m.set(.absent) { lines.append($0) }
        m.set(.steering(plan, error: nil)) { lines.append($0) }
        XCTAssertEqual(m.plan, plan)
        let refused = EdgeError(.steer, errno: 1, "bpf: Operation not permitted")
        m.set(.steering(plan, error: refused)) { lines.append($0) }
        XCTAssertEqual(m.error, refused)
        m.set(.steering(plan, error: refused)) { lines.append($0) }
        m.set(.absent) { lines.append($0) }
        XCTAssertNil(m.plan)
        XCTAssertNil(m.error)
        XCTAssertEqual(lines, ["steering: unchecked -> absent", "steering: absent -> steering", "steering: steering -> failed",
                               "steering: failed -> absent"])
    }
}
