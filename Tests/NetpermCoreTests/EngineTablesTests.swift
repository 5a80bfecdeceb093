// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import NetpermProtocol
import TestSupport
import XCTest

/// The nftables tables' upkeep as the engine hands it out (Engine+Tables.swift), input -> effects: each load asked
/// for, the kernel asked as a step of its own, one load run at a time, answered by its id, what follows the tables,
/// and another process's changes repaired, bounded. The fake kernel answers only when the test says
/// (`tablesAreManual`). TableUpkeepTests and LoadQueueTests hold the same decisions as pure values.
final class EngineTablesTests: XCTestCase {
    private let policy = "[Enforcement]\nMode=block\n[App phone]\nUser=1000\nWWAN=deny\n"

    /// Started with the fake kernel answering only when told; the steps of the start-up's loads cleared.
    private func harness(_ policy: String? = nil) -> EngineHarness {
        let h = EngineHarness(policy: policy ?? self.policy, links: [Links.lo, Links.eth], started: false)
        h.tablesAreManual = true
        h.feed(.started)
        return h
    }

    /// Rules in force and the counting table's quiet removal done: nothing pending.
    private func inForce() -> EngineHarness {
        let h = harness()
        h.answerLookup(.tables(rules: true, handover: false))
        h.finishRun()
        h.answerLookup(.usage(false))
        XCTAssertEqual(h.pendingRuns.count + h.pendingLookups.count, 0)
        h.tableSteps = []
        return h
    }

    private func state(_ h: EngineHarness) -> JSON? { h.request(h.connect(), "STATUS")["enforcement"]?["state"] }

    /// The first whole load asks the kernel first and goes through the handover's table when one is in force; the
    /// counting table's quiet removal waits behind it, runs only if its table exists, and is answered without
    /// running when it does not.
    func testTheFirstLoadAsksTheKernelThenRunsThroughTheHandover() {
        let h = harness()
        XCTAssertEqual(h.tableSteps, ["ask 1 rules", "look-up rules", "ask 2 usage quietly"])
        h.answerLookup(.tables(rules: true, handover: false))
        XCTAssertEqual(h.tableSteps.suffix(1), ["run 1 rules 3"], "handed over from the table in force")
        XCTAssertEqual(state(h), "applying")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(3), ["follow rulesInForce", "answered 1", "look-up usage"])
        XCTAssertEqual(state(h), "enforcing")
        h.answerLookup(.usage(false))
        XCTAssertEqual(h.tableSteps.suffix(1), ["answered 2"], "no counting table: nothing run")
        XCTAssertTrue(h.pendingRuns.isEmpty)
        for (answer, count) in [(TableUpkeep.TableLookup.tables(rules: false, handover: false), 1),
                                (.tables(rules: false, handover: true), 2), (.tables(rules: nil, handover: nil), 3),
                                (.failed(errno: 13, words: "EACCES"), 3)] {
            let h = harness()
            h.answerLookup(answer)
            XCTAssertEqual(h.tableSteps.last, "run 1 rules \(count)", "\(answer)")
        }
    }

    /// One load at a time: a change asked for while one runs waits for its answer, then runs as it came (elements
    /// as nf_tables messages, no lookup).
    func testOneLoadAtATime() {
        let h = inForce()
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.tableSteps, ["ask 3 rules", "run 3 rules 1 elements"])
        h.setLinks([Links.lo, Links.eth, Links.wwan, Links.wlan])
        h.setLinks([Links.lo, Links.eth])
        XCTAssertEqual(h.tableSteps.count, 2, "nothing asked while the engine's load is away: \(h.tableSteps)")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(4), ["follow rulesInForce", "answered 3", "ask 4 rules", "run 4 rules 1 elements"],
                       "the latest asked for once the load away is answered")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(1), ["answered 4"])
        XCTAssertEqual(state(h), "enforcing")
    }

    /// Mode=off at start-up: the removal asks whether a table was left behind, and is answered without running when
    /// none was (Mode=off never loads libnftables), or when nftables would not say.
    func testAQuietRemovalWithNothingLeftDoesNotRun() {
        let cases: [(TableUpkeep.TableLookup, String?)] = [
            (.tables(rules: false, handover: false), "answered 1"),
            (.tables(rules: nil, handover: false), "answered 1 \(TableUpkeep.notPermitted(.loadRules))"),
            (.failed(errno: 1, words: "EPERM"), "answered 1 \(TableUpkeep.cannotAsk(.loadRules, 1, "EPERM"))"),
            (.tables(rules: true, handover: false), nil),
        ]
        for (answer, answered) in cases {
            let h = harness("[App phone]\nUser=1000\n")
            XCTAssertEqual(Array(h.tableSteps.prefix(2)), ["ask 1 rules quietly", "look-up rules"])
            h.answerLookup(answer)
            XCTAssertEqual(h.pendingRuns.count, answered == nil ? 1 : 0, "\(answer)")
            if let answered { XCTAssertTrue(h.tableSteps.contains(answered), "\(h.tableSteps)") }
            XCTAssertEqual(state(h), "off")
        }
    }

    /// Another process's change of the rules' table is repaired (the rules in force, whole, through the handover),
    /// at most five times a second; a repair that fails with nothing of the engine's behind it fails enforcement,
    /// which the engine retries; past the bound, enforcement fails at once.
    func testAForeignChangeIsRepairedBounded() {
        let h = inForce()
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1_000_000, by: .process(pid: 42, name: "nft"))))
        XCTAssertEqual(h.logged(containing: "pid 42 (nft) changed table inet netpermd; loading the rules again").count, 1)
        XCTAssertEqual(h.tableSteps, ["look-up rules"])
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1_000_001, by: .unknown)))
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1_000_001, by: .unknown)))
        XCTAssertEqual(h.tableSteps, ["look-up rules"], "one at a time, one more waiting (the third coalesced)")
        h.answerLookup(.tables(rules: true, handover: false))
        XCTAssertEqual(h.tableSteps.last, "run repair rules 3")
        h.finishRun(failure: EdgeError(.loadRules, "refused"))
        XCTAssertEqual(h.logged(containing: "loading the rules again failed: ").count, 1)
        XCTAssertEqual(state(h), "failed", "nothing of the engine's waited: the engine retries")
        XCTAssertEqual(h.tableSteps.suffix(1), ["look-up rules"], "the repair that waited")
        h.answerLookup(.tables(rules: true, handover: false))
        h.finishRun()
        XCTAssertTrue(h.pendingRuns.isEmpty && h.pendingLookups.isEmpty, "\(h.tableSteps)")
        h.tableSteps = []
        for t in 3...4 {
            h.feed(.tablesChanged(TablesChange(usage: false, at: 1_000_000 + UInt64(t), by: .unknown)))
        }
        XCTAssertEqual(h.tableSteps, ["look-up rules"])
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1_000_005, by: .unknown)))
        XCTAssertEqual(h.logged(containing: "keeps being changed by others; not loading it again").count, 1)
        XCTAssertEqual(h.tableSteps, ["look-up rules"], "not loaded again")
        for _ in 0..<2 {
            h.answerLookup(.tables(rules: true, handover: false))
            h.finishRun()
        }
        XCTAssertTrue(h.pendingRuns.isEmpty && h.pendingLookups.isEmpty, "\(h.tableSteps)")
        h.feed(.tablesChanged(TablesChange(usage: false, at: 2_000_005, by: .unknown)))
        XCTAssertEqual(h.tableSteps.suffix(1), ["look-up rules"], "a second later: the first ones have aged out")
    }

    /// A repair that fails while a load of the engine's waits behind it: that load takes the whole table (through
    /// the handover), and the engine hears only its own load's answer.
    func testAFailedRepairMakesTheNextLoadWhole() {
        let h = inForce()
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1, by: .unknown)))
        h.answerLookup(.tables(rules: true, handover: false))
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.tableSteps.suffix(2), ["run repair rules 3", "ask 3 rules"])
        h.finishRun(failure: EdgeError(.loadRules, "refused"))
        XCTAssertEqual(h.tableSteps.suffix(1), ["look-up rules"], "the engine's partial load, now whole")
        h.answerLookup(.tables(rules: true, handover: false))
        XCTAssertEqual(h.tableSteps.suffix(1), ["run 3 rules 3"])
        h.finishRun()
        XCTAssertEqual(state(h), "enforcing")
    }

    /// Another process committed during the daemon's own load: a repair soon, and, while counting, the counting
    /// table is read and loaded again; the removal of the rules closes what follows them.
    func testACommitDuringALoadAndTheRemoval() {
        let h = inForce()
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        h.finishRun(othersCommitted: true)
        // The fake's timer fires at once: its change comes as the next input.
        XCTAssertEqual(h.tableSteps.suffix(4), ["repair-soon", "follow rulesInForce", "answered 3", "look-up rules"])
        XCTAssertEqual(h.logged(containing: "another process (it committed during the daemon's own load) changed").count, 1)
        h.answerLookup(.tables(rules: true, handover: false))
        h.finishRun()
        h.reload(policy: "[App phone]\nUser=1000\n")
        XCTAssertEqual(h.tableSteps.suffix(2), ["ask 4 rules", "run 4 rules 1"], "the rules in force: removed without asking")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(2), ["follow rulesRemoved(keepWatch: false)", "answered 4"])
        h.feed(.tablesChanged(TablesChange(usage: false, at: 2, by: .unknown)))
        XCTAssertEqual(h.tableSteps.suffix(1), ["answered 4"], "nothing in force: no repair")
    }

    /// A repair with a whole load of the engine's waiting behind it is dropped (that load makes it needless); one with
    /// a partial load behind it runs first.
    func testARepairBeforeAWholeLoadIsDropped() {
        let h = inForce()
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        h.feed(.tablesChanged(TablesChange(usage: false, at: 1, by: .unknown)))
        h.finishRun(failure: EdgeError(.loadRules, "refused"))
        // The engine's partial load was refused: it asks for the whole table, behind the repair.
        XCTAssertEqual(h.tableSteps.suffix(3), ["answered 3 refused", "ask 4 rules", "look-up rules"], "\(h.tableSteps)")
        h.answerLookup(.tables(rules: true, handover: false))
        XCTAssertEqual(h.tableSteps.suffix(1), ["run 4 rules 3"], "the repair dropped: the whole load makes it needless")
        h.finishRun()
        XCTAssertTrue(h.pendingRuns.isEmpty && h.pendingLookups.isEmpty, "\(h.tableSteps)")
        XCTAssertEqual(state(h), "enforcing")
        h.feed(.tablesChanged(TablesChange(usage: false, at: 2, by: .unknown)))
        h.setLinks([Links.lo, Links.eth])
        XCTAssertEqual(h.tableSteps.suffix(2), ["look-up rules", "ask 5 rules"])
        h.answerLookup(.tables(rules: true, handover: false))
        XCTAssertEqual(h.tableSteps.suffix(1), ["run repair rules 3"], "a partial load behind it: the repair runs")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(1), ["run 5 rules 1 elements"])
    }

    /// Another process committed during a load while the counting table is in force: the engine reads that table
    /// again and loads it whole (it may have been touched too), besides the repair soon.
    func testACommitDuringALoadWhileCountingReadsTheCountingTableAgain() {
        let h = harness("[Enforcement]\nMode=block\n[Usage]\nCount=yes\n[App phone]\nUser=1000\nWWAN=deny\n")
        XCTAssertEqual(h.tableSteps, ["ask 1 rules", "look-up rules", "ask 2 usage"], "the counting table in turn")
        h.answerLookup(.tables(rules: true, handover: false))
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(1), ["run 2 usage 1"], "no lookup: not a removal")
        h.finishRun()
        XCTAssertEqual(h.tableSteps.suffix(2), ["follow usageInForce", "answered 2"])
        XCTAssertEqual(h.request(h.connect(), "STATUS")["usage"]?["state"], "counting")
        h.setLinks([Links.lo, Links.eth, Links.wwan])
        XCTAssertEqual(h.tableSteps.suffix(3), ["ask 3 rules", "run 3 rules 1 elements", "ask 4 usage"])
        h.finishRun(othersCommitted: true)
        XCTAssertEqual(h.logged(containing: "another process changed the counting table").count, 1)
        XCTAssertEqual(Array(h.tableSteps.suffix(4).prefix(2)), ["repair-soon", "follow rulesInForce"])
    }
}
