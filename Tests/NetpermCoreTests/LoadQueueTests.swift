// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
@testable import NetpermCore

/// The order of the daemon's nft loads and when a repair is worth one (LoadQueue), without a kernel: the engine
/// hands out what it decides (EngineTablesTests), the Enforcer runs it.
final class LoadQueueTests: XCTestCase {
    typealias Queue = LoadQueue<String>

    func kinds(_ q: inout Queue, inForce: String?) -> [String] {
        var out: [String] = []
        while let j = q.next(inForce: inForce) { out.append("\(j.kind) \(j.transactions.map(\.text).joined(separator: "+"))") }
        return out
    }

    func testLoadsGoInTheOrderTheyCame() {
        var q = Queue()
        q.rules(["a1", "a2"], whole: "A", done: "first")
        q.usage("u", done: "usage")
        q.rules(["B"], whole: "B", done: "second")
        XCTAssertEqual(kinds(&q, inForce: nil), ["rules a1+a2", "usage u", "rules B"])
        XCTAssertTrue(q.isEmpty)
    }

    /// At most five repairs in any second; one waiting at a time; it loads the rules in force when it starts.
    func testRepairsAreBoundedAndCoalesced() {
        var q = Queue()
        XCTAssertEqual(q.repair(at: 1_000_000), .queued)
        XCTAssertEqual(q.repair(at: 1_100_000), .waiting, "one waiting is enough")
        XCTAssertEqual(kinds(&q, inForce: "R"), ["repair R"])
        XCTAssertEqual(q.repair(at: 1_200_000), .queued)
        XCTAssertEqual(kinds(&q, inForce: "R2"), ["repair R2"], "the rules in force when it starts")
        XCTAssertEqual(q.repair(at: 1_300_000), .queued)
        _ = q.next(inForce: "R")
        XCTAssertEqual(q.repair(at: 1_400_000), .queued, "the fifth within a second")
        _ = q.next(inForce: "R")
        XCTAssertEqual(q.repair(at: 1_500_000), .tooMany, "the sixth within a second")
        XCTAssertTrue(q.isEmpty)
        XCTAssertEqual(q.repair(at: 2_300_001), .queued, "a second later: the first ones have aged out")
    }

    /// A repair is dropped when nothing is in force, or when a whole load waits behind it (that load makes it
    /// needless); a partial load behind it does not.
    func testNeedlessRepairsAreDropped() {
        var q = Queue()
        _ = q.repair(at: 1)
        XCTAssertEqual(kinds(&q, inForce: nil), [], "nothing in force to load again")
        _ = q.repair(at: 2)
        q.rules(["W"], whole: "W", done: "whole")
        XCTAssertEqual(kinds(&q, inForce: "R"), ["rules W"])
        _ = q.repair(at: 3)
        q.rules(["p1"], whole: "W2", done: "partial")
        XCTAssertEqual(kinds(&q, inForce: "R"), ["repair R", "rules p1"])
    }

    /// A repair failed with a load of the engine's behind it: that load takes the whole table (the engine hears only
    /// its own loads' answers); with nothing behind it, the engine must hear of the failure.
    func testAFailedRepairMakesTheNextLoadWhole() {
        var q = Queue()
        XCTAssertFalse(q.repairFailed(), "nothing waits: the engine is told")
        q.rules(["p1", "p2"], whole: "W", done: "partial")
        q.rules(["p3"], whole: "W3", done: "then")
        XCTAssertTrue(q.repairFailed())
        XCTAssertEqual(kinds(&q, inForce: "R"), ["rules W", "rules p3"], "only the next one")
    }

    func testAnswersGoToWhoAsked() {
        var q = Queue()
        q.rules(["x"], whole: "X", done: "the engine")
        _ = q.repair(at: 5)
        XCTAssertEqual(q.next(inForce: nil)?.done, "the engine")
        XCTAssertNil(q.next(inForce: "X")?.done, "a repair's answer goes to no one")
    }
}

/// The queue's tests name scripts by short words.
extension RuleTransaction: ExpressibleByStringLiteral {
    public init(stringLiteral text: String) { self.init(whole: text) }
}
