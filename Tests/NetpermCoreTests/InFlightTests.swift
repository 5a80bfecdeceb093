// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
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
}
