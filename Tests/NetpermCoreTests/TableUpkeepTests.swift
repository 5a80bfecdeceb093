// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
@testable import NetpermCore

/// What the engine's tables machine decides (TableUpkeep), without a kernel: what runs next and how, what is in force, whether
/// another process's change is repaired, and what follows a load's end; the kernel asked only as a step of its own,
/// and each load's answer matched by its id.
final class TableUpkeepTests: XCTestCase {
    typealias Upkeep = TableUpkeep

    let ruleset = "table inet netpermd {}\ndelete table inet netpermd\ntable inet netpermd {\n}\n"

    /// Every lookup answered `answer`; the kinds asked are kept.
    final class Kernel {
        var answer: (Upkeep.Lookup) -> Upkeep.TableLookup
        var asked: [Upkeep.Lookup] = []
        init(_ answer: @escaping (Upkeep.Lookup) -> Upkeep.TableLookup) { self.answer = answer }
        func lookUp(_ l: Upkeep.Lookup) -> Upkeep.TableLookup { asked.append(l); return answer(l) }
    }

    /// The next step, the kernel asked (as the edge does) when it asks for a lookup.
    func next(_ u: inout Upkeep, _ kernel: Kernel) -> Upkeep.Step? {
        let step = u.next()
        guard case let .lookUp(lookup)? = step else { return step }
        XCTAssertNil(u.next(), "nothing else while the kernel is asked")
        XCTAssertTrue(u.busy)
        let then = u.lookedUp(kernel.lookUp(lookup))
        if case .lookUp? = then { XCTFail("asked twice") }
        return then
    }

    func run(_ u: inout Upkeep, _ kernel: Kernel) -> (Upkeep.Job, Upkeep.Run)? {
        guard case let .run(job, run)? = next(&u, kernel) else { return nil }
        return (job, run)
    }

    /// A partial load runs as it came, elements as nf_tables messages, without asking the kernel anything.
    func testAPartialLoadRunsAsItCame() {
        var u = Upkeep()
        let kernel = Kernel { _ in XCTFail("nothing to ask"); return .failed(errno: 1, words: "") }
        _ = u.rules(["p1", "p2"], whole: ruleset)
        let (job, r) = run(&u, kernel)!
        XCTAssertEqual(r, Upkeep.Run(scripts: ["p1", "p2"], elements: true, operation: .loadRules))
        XCTAssertTrue(u.running)
        XCTAssertNil(next(&u, kernel), "one at a time")
        let f = u.finished(job, failure: nil, othersCommitted: false)
        XCTAssertEqual(f, Upkeep.Finish(watching: .rulesInForce))
        XCTAssertEqual(u.rulesInForce, ruleset)
        XCTAssertFalse(u.busy)
    }

    /// A whole load goes through the handover's table when a table is in force, or when the kernel would not say.
    func testAWholeLoadIsHandedOverWhenATableIsInForce() {
        for (answer, count) in [(Upkeep.TableLookup.tables(rules: true, handover: false), 3),
                                (.tables(rules: false, handover: false), 1), (.tables(rules: false, handover: true), 2),
                                (.tables(rules: nil, handover: nil), 3), (.failed(errno: 13, words: "EACCES"), 3)] {
            var u = Upkeep()
            let kernel = Kernel { _ in answer }
            _ = u.rules([RuleTransaction(whole: ruleset)], whole: ruleset)
            let (_, r) = run(&u, kernel)!
            XCTAssertEqual(kernel.asked, [.rules])
            XCTAssertEqual(r.scripts.count, count, "\(answer)")
            XCTAssertFalse(r.elements)
        }
    }

    /// The removal with nothing loaded by this run is answered without running unless a table was left behind.
    func testARemovalWithNothingLoadedAsksFirst() {
        let cases: [(Upkeep.TableLookup, EdgeError??)] = [
            (.tables(rules: false, handover: false), .some(nil)),
            (.tables(rules: nil, handover: false), .some(EdgeError(.loadRules, "not permitted to look at nftables"))),
            (.failed(errno: 1, words: "EPERM"), .some(EdgeError(.loadRules, errno: 1, "cannot ask nftables: EPERM"))),
            (.tables(rules: true, handover: false), nil),
        ]
        for (answer, answered) in cases {
            var u = Upkeep()
            let id = u.rules([RuleTransaction(whole: Ruleset.removal)], whole: Ruleset.removal)
            switch next(&u, Kernel { _ in answer }) {
            case let .answered(job, error)?:
                XCTAssertEqual(job.done, id)
                XCTAssertEqual(error, answered!, "\(answer)")
                XCTAssertFalse(u.running)
            case .run?:
                XCTAssertNil(answered, "\(answer): runs")
            case nil, .lookUp?:
                XCTFail("a step")
            }
        }
    }

    /// The counting table's removal runs only when the table exists; the rules' removal leaves the watch to it.
    func testTheCountingTable() {
        var u = Upkeep()
        let kernel = Kernel { _ in .usage(false) }
        _ = u.usage("u")
        let (job, r) = run(&u, kernel)!
        XCTAssertEqual(r.operation, .loadUsageRules)
        XCTAssertEqual(u.finished(job, failure: nil, othersCommitted: false).watching, .usageInForce)
        XCTAssertTrue(u.usageInForce)
        XCTAssertEqual(u.foreignChange(usage: true, at: 1), .usageChanged)
        XCTAssertEqual(u.foreignChange(usage: false, at: 1), .ignored, "no rules in force")
        _ = u.usage(UsageRules.removal)
        guard case .answered(_, nil)? = next(&u, kernel) else { return XCTFail("answered: no table") }
        XCTAssertFalse(u.usageInForce)
        XCTAssertEqual(u.foreignChange(usage: true, at: 2), .ignored)
    }

    /// Another process's change: repaired while rules are in force, bounded; a repair that fails goes to the engine
    /// only when no load of its waits; a commit during a load asks for a repair and, while counting, tells the engine.
    func testRepairs() {
        var u = Upkeep()
        let kernel = Kernel { _ in .tables(rules: true, handover: false) }
        _ = u.usage("u")
        _ = u.rules(["p"], whole: ruleset)
        var (job, _) = run(&u, kernel)!
        _ = u.finished(job, failure: nil, othersCommitted: false)
        (job, _) = run(&u, kernel)!
        let f = u.finished(job, failure: nil, othersCommitted: true)
        XCTAssertEqual(f, Upkeep.Finish(repairSoon: true, usageChanged: true, watching: .rulesInForce))
        XCTAssertEqual(u.foreignChange(usage: false, at: 1_000_000), .repairQueued)
        XCTAssertEqual(u.foreignChange(usage: false, at: 1_000_001), .repairWaiting)
        (job, _) = run(&u, kernel)!
        XCTAssertEqual(job.kind, .repair)
        let failure = EdgeError(.loadRules, "refused")
        XCTAssertEqual(u.finished(job, failure: failure, othersCommitted: false),
                       Upkeep.Finish(repairFailure: failure, engineRetries: failure), "nothing waits: the engine retries")
        XCTAssertEqual(u.rulesInForce, ruleset, "the rules in force stay what they were")
        for t in 2...4 { XCTAssertEqual(u.foreignChange(usage: false, at: 1_000_000 + UInt64(t)), t == 2 ? .repairQueued : .repairWaiting) }
        XCTAssertEqual(u.foreignChange(usage: false, at: 1_000_005),
                       .tooMany(EdgeError(.loadRules, "the table keeps being changed by another process")))
        (job, _) = run(&u, kernel)!
        let q = u.rules(["q"], whole: ruleset)
        XCTAssertEqual(u.finished(job, failure: failure, othersCommitted: false).engineRetries, nil,
                       "a load of the engine's waits: it takes the whole table")
        let (last, r) = run(&u, kernel)!
        XCTAssertEqual(last.done, q)
        XCTAssertEqual(r.scripts.count, 3, "whole, through the handover")
    }

    /// The kernel is asked as a step of its own: nothing else starts until its answer comes, and the answer goes on
    /// with the job that asked; each load's answer names the id it was given.
    func testTheKernelIsAskedAsAStepOfItsOwn() {
        var u = Upkeep()
        let whole = u.rules([RuleTransaction(whole: ruleset)], whole: ruleset)
        guard case .lookUp(.rules)? = u.next() else { return XCTFail("the kernel asked first") }
        let counting = u.usage("u")
        XCTAssertNotEqual(whole, counting)
        XCTAssertNil(u.next(), "nothing starts while the kernel is asked")
        guard case let .run(job, r)? = u.lookedUp(.tables(rules: true, handover: false)) else { return XCTFail("runs") }
        XCTAssertEqual(job.done, whole)
        XCTAssertEqual(r.scripts.count, 3, "handed over from the table in force")
        XCTAssertNil(u.lookedUp(.tables(rules: true, handover: false)), "nothing asked")
        _ = u.finished(job, failure: nil, othersCommitted: false)
        guard case let .run(next, _)? = u.next() else { return XCTFail("the counting table's load, unasked") }
        XCTAssertEqual(next.done, counting)
    }

    /// The removal of the rules closes what follows them, and keeps the watch while counting.
    func testRemovalClosesWhatFollowsTheRules() {
        var u = Upkeep()
        let kernel = Kernel { _ in .tables(rules: true, handover: false) }
        _ = u.rules(["p"], whole: ruleset)
        var (job, _) = run(&u, kernel)!
        _ = u.finished(job, failure: nil, othersCommitted: false)
        _ = u.rules([RuleTransaction(whole: Ruleset.removal)], whole: Ruleset.removal)
        (job, _) = run(&u, kernel)!
        XCTAssertEqual(kernel.asked, [], "rules in force: removed without asking")
        XCTAssertEqual(u.finished(job, failure: nil, othersCommitted: false).watching, .rulesRemoved(keepWatch: false))
        XCTAssertNil(u.rulesInForce)
        XCTAssertEqual(u.foreignChange(usage: false, at: 1), .ignored)
        _ = u.foreignChange(usage: false, at: 2)
        XCTAssertNil(next(&u, kernel), "no repair queued with nothing in force")
    }
}
