// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermDaemon
import NetpermIO
import TestSupport
import XCTest

/// Loads of the rules run off the loop (the Enforcer's thread): on the test loop the fake rules edge holds each
/// load's answer until the test ends it (`FakeRules.finish`), as a slow load on its thread would. Clients are
/// answered meanwhile; a RELOAD or DECIDE is answered only once the load that carries it ends; a change that comes
/// during a load waits behind it; a refused load in flight is followed by the whole table.
final class LoadsInFlightTests: XCTestCase {
    /// Enforcement's edge tests' policy, and an app whose `ask` a DECIDE answers.
    static let policy = EnforcementEdgeTests.policy + "\n\n[App backup]\nUser=4243\nWWAN=ask\n"

    private func bed() throws -> DaemonBed {
        let b = try DaemonBed(policy: Self.policy, links: [DaemonBed.eth, EnforcementEdgeTests.wwan])
        addTeardownBlock { b.close() }
        b.rules.holding = true
        // The lifecycle's moves are logged at debug.
        let level = Log.maxPriority
        Log.maxPriority = 7
        addTeardownBlock { Log.maxPriority = level }
        return b
    }

    /// Runs the loop until `count` loads wait for their answer.
    private func inFlight(_ b: DaemonBed, _ count: Int = 1) {
        XCTAssertTrue(b.loop.run(until: { b.rules.pending == count }), "\(b.rules.pending) loads in flight, not \(count)")
    }

    /// A change of links loads rules; while the load is in flight, QUERY and STATUS are answered from the rules in
    /// force, and the lifecycle says `changing` until the answer.
    func testAQueryIsAnsweredWhileALoadIsInFlight() throws {
        let b = try bed()
        let c = try b.connect()
        let loads = b.rules.loaded.count
        b.setLinks([DaemonBed.eth])
        XCTAssertEqual(b.rules.loaded.count, loads + 1)
        inFlight(b)
        XCTAssertEqual(b.logged("enforcement: enforcing -> changing (only what differs)").count, 1, "\(b.log)")
        let q = try b.request(c, "QUERY updater")
        XCTAssertEqual(q["ok"], true, "\(q)")
        XCTAssertEqual(q["enforced"], true, "the rules in force meanwhile")
        XCTAssertEqual(try b.request(c, "STATUS")["enforcement"]?["state"], "enforcing")
        b.rules.finish()
        XCTAssertEqual(b.logged("enforcement: changing (only what differs) -> enforcing").count, 1)
        XCTAssertEqual(b.rules.pending, 0)
    }

    /// STATUS counts what the rules in force name, not what was handed over (issue 37: under cgroup churn it said
    /// all 5,000 unit cgroups were enforced 1.2 s before the kernel's map held them): a uid added by a reload is
    /// counted once its load is answered, not while it is in flight.
    func testStatusCountsWhatIsInForce() throws {
        let b = try bed()
        let c = try b.connect()
        let before = try XCTUnwrap(try b.request(c, "STATUS")["enforcement"]?["uids"]?.intValue)
        let apps = try XCTUnwrap(try b.request(c, "STATUS")["enforcement"]?["apps"]?.intValue)
        try AtomicFile.write(b.policyPath, Self.policy + "\n\n[App later]\nUser=4244\nWWAN=deny\n")
        try b.send(c, "RELOAD")
        inFlight(b)
        let other = try b.connect()
        let during = try b.request(other, "STATUS")["enforcement"]
        XCTAssertEqual(during?["uids"]?.intValue, before, "the new uid is not in force yet: \(during.map { "\($0)" } ?? "")")
        XCTAssertEqual(during?["apps"]?.intValue, apps, "nor its app")
        b.rules.finish()
        XCTAssertEqual(b.lines(c).first?["generation"], 2)
        let after = try b.request(other, "STATUS")["enforcement"]
        XCTAssertEqual(after?["uids"]?.intValue, before + 1)
        XCTAssertEqual(after?["apps"]?.intValue, apps + 1)
    }

    /// A DECIDE's reply waits for the load of its rules, and so does a RELOAD's; others are answered meanwhile.
    func testADecideAndAReloadAreAnsweredOnceTheirRulesAreInForce() throws {
        let b = try bed()
        let decider = try b.connect()
        let other = try b.connect()
        try b.send(decider, "DECIDE backup wwan allow")
        inFlight(b)
        XCTAssertTrue(b.rules.loaded.last?.joined().contains("4243") ?? false, "backup's uid: \(b.rules.loaded.last ?? [])")
        XCTAssertEqual(b.lines(decider, timeout: 0.1), [], "held while its rules load")
        XCTAssertEqual(try b.request(other, "PING")["pong"], true, "answered meanwhile")
        XCTAssertEqual(try b.request(other, "QUERY backup")["permissions"]?["wwan"], "allow", "the decision stands")
        b.rules.finish()
        XCTAssertEqual(b.lines(decider).first?["decided"]?["decision"], "allow")

        try AtomicFile.write(b.policyPath, Self.policy + "\n\n[App later]\nUser=4244\nWWAN=deny\n")
        let reloader = try b.connect()
        try b.send(reloader, "RELOAD")
        inFlight(b)
        XCTAssertEqual(b.lines(reloader, timeout: 0.1), [], "held while its rules load")
        XCTAssertEqual(try b.request(other, "STATUS")["policy"]?["generation"], 2, "the policy is in force meanwhile")
        XCTAssertEqual(b.notifications.last, .reloading, "the reload is not done for systemd either")
        b.rules.finish()
        XCTAssertEqual(b.lines(reloader).first?["generation"], 2)
        guard case .ready = b.notifications.last else { return XCTFail("\(b.notifications)") }
    }

    /// Changes that come during a load are not loaded beside it: the state they lead to is loaded once it ends,
    /// and a DECIDE made meanwhile is answered after that second load, not after the first.
    func testASecondChangeDuringALoadIsQueuedBehindIt() throws {
        let b = try bed()
        let loads = b.rules.loaded.count
        b.setLinks([DaemonBed.eth])
        inFlight(b)
        let decider = try b.connect()
        try b.send(decider, "DECIDE backup wwan allow")
        XCTAssertTrue(b.loop.run(until: { !b.logged("decision: backup may use wwan").isEmpty }), "decided")
        b.setLinks([DaemonBed.eth, EnforcementEdgeTests.wwan])
        XCTAssertEqual(b.rules.loaded.count, loads + 1, "one load at a time: \(b.rules.loaded.dropFirst(loads))")
        b.rules.finish()
        XCTAssertEqual(b.rules.loaded.count, loads + 2, "what the state asks for now, once the first ended")
        let second = b.rules.loaded.last!.joined()
        XCTAssertTrue(second.contains("wwan0") && second.contains("4243"), second)
        XCTAssertEqual(b.lines(decider, timeout: 0.1), [], "its rules are in the second load")
        b.rules.finish()
        XCTAssertEqual(b.lines(decider).first?["ok"], true)
        XCTAssertEqual(b.rules.loaded.count, loads + 2, "nothing more to load")
    }

    /// A DECIDE whose load ends is answered then, though the change that came during it is loaded next.
    func testADecideIsAnsweredByItsLoadThoughAnotherFollows() throws {
        let b = try bed()
        let decider = try b.connect()
        try b.send(decider, "DECIDE backup wwan allow")
        inFlight(b)
        let loads = b.rules.loaded.count
        b.setLinks([DaemonBed.eth])
        b.rules.finish()
        XCTAssertEqual(b.rules.loaded.count, loads + 1, "the links' change, loaded next")
        XCTAssertEqual(b.lines(decider).first?["ok"], true, "answered by the load that carried it")
        XCTAssertEqual(b.rules.pending, 1)
        b.rules.finish()
    }

    /// A change of only what differs is refused after it left the loop: the whole table follows, and the DECIDE
    /// that asked for it is answered only once the whole table is in force; no retry is left behind.
    func testARefusedLoadInFlightIsFollowedByTheRepair() throws {
        let b = try bed()
        let c = try b.connect()
        let loads = b.rules.loaded.count
        b.rules.answers = [EnforcementEdgeTests.refused]
        try b.send(c, "DECIDE backup wwan allow")
        inFlight(b)
        XCTAssertGreaterThan(b.rules.loaded.last?.count ?? 0, 0)
        b.rules.finish()
        XCTAssertEqual(b.rules.loaded.count, loads + 2, "the whole table after the refusal")
        XCTAssertEqual(b.rules.loaded.last?.count, 1)
        XCTAssertEqual(b.logged("enforcement: changing (only what differs) -> repairing (the whole table)").count, 1)
        inFlight(b)
        XCTAssertEqual(b.lines(c, timeout: 0.1), [], "held until the whole table is in force")
        let other = try b.connect()
        XCTAssertEqual(try b.request(other, "QUERY updater")["ok"], true, "answered during the repair")
        b.rules.finish()
        XCTAssertEqual(b.lines(c).first?["ok"], true)
        XCTAssertEqual(try b.request(other, "STATUS")["enforcement"]?["state"], "enforcing")
        b.loop.advance(byMicroseconds: 60_000_000)
        XCTAssertEqual(b.rules.loaded.count, loads + 2, "no retry left behind")
    }

    /// The descriptors of the cgroups a load names stay open until it ends, beside those of the rules in force;
    /// once it has ended they are the ones in force.
    func testTheDescriptorsALoadNamesAreKeptUntilItEnds() throws {
        let b = try bed()
        var kept: [Set<Int32>] = []
        b.interpreter.handlesInForce = { kept.append($0) }
        let cron = { (id: UInt64, fd: Int32) in
            UnitCgroups(nftRoot: "unified", units: [
                UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: id, handle: fd),
            ])
        }
        b.interpreter.feed(.cgroups(cron(7, 41)))
        inFlight(b)
        XCTAssertEqual(kept.last, [41], "named by the load in flight")
        b.rules.finish()
        XCTAssertEqual(kept.last, [41], "in force")
        b.interpreter.feed(.cgroups(cron(8, 42)))
        inFlight(b)
        XCTAssertEqual(kept.last, [41, 42], "the old in force, the new in flight")
        b.rules.finish()
        XCTAssertEqual(kept.last, [42])
    }
}
