// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermSystemd
import XCTest

/// The bus's calls bounded in flight (issue 48: 200 GetAll sent at once, the 73 past the bus's 128 refused and read
/// as "device gone"): never more out than the limit, in order, a refusal tried again at the head of the queue with
/// the limit lowered to what the bus took, and given up only after its last try.
final class CallWindowTests: XCTestCase {
    /// Sends what the window lets go.
    private func sendAll(_ w: inout CallWindow<Int>) -> [(call: Int, attempt: Int)] {
        var out: [(call: Int, attempt: Int)] = []
        while let n = w.next() { out.append(n) }
        return out
    }

    func testAtMostTheLimitIsOutAndTheRestGoInOrderAsAnswersCome() {
        var w = CallWindow<Int>(limit: 32)
        for i in 0..<200 { w.add(i) }
        XCTAssertEqual(sendAll(&w).map(\.call), Array(0..<32), "the first 32, nothing more")
        XCTAssertEqual(w.inFlight, 32)
        XCTAssertEqual(w.waitingCount, 168)
        var sent = Array(0..<32)
        // Each answer lets exactly one more go, in order, each on its first try.
        while w.inFlight > 0 {
            w.answered()
            let next = sendAll(&w)
            XCTAssertLessThanOrEqual(next.count, 1)
            XCTAssertTrue(next.allSatisfy { $0.attempt == 1 })
            sent += next.map(\.call)
            XCTAssertLessThanOrEqual(w.inFlight, 32)
        }
        XCTAssertEqual(sent, Array(0..<200), "every call sent once, in order")
        XCTAssertEqual(w.waitingCount, 0)
    }

    func testARefusedCallGoesFirstOnceARoomIsFreeAndTheLimitComesDownToWhatTheBusTook() {
        var w = CallWindow<Int>(limit: 32)
        for i in 0..<40 { w.add(i) }
        _ = sendAll(&w)
        // The bus took 16 and refused the 16 after (as with max_replies_per_connection 16).
        for i in 16..<32 {
            XCTAssertEqual(w.refused(i, attempt: 1), .queued, "others are out: it waits for one of their answers")
        }
        XCTAssertEqual(w.limit, 16, "as many as the bus took")
        XCTAssertEqual(w.inFlight, 16)
        XCTAssertTrue(sendAll(&w).isEmpty, "nothing goes while the 16 the bus took are out")
        w.answered()
        let retry = sendAll(&w)
        XCTAssertEqual(retry.count, 1)
        XCTAssertEqual(retry.first?.attempt, 2, "its second try")
        XCTAssertEqual(retry.first?.call, 31, "the last refused is at the head")
        // Every refused call is sent again before any new one.
        var order: [Int] = retry.map(\.call)
        while w.inFlight > 0 || w.waitingCount > 0 {
            w.answered()
            order += sendAll(&w).map(\.call)
        }
        XCTAssertEqual(Set(order.prefix(16)), Set(16..<32))
        XCTAssertEqual(Array(order.dropFirst(16)), Array(32..<40))
        XCTAssertEqual(w.limit, 16, "the limit stays down for the connection")
    }

    func testARefusalWithNothingOutWaitsItsBackOffAndIsGivenUpAfterItsLastTry() {
        var w = CallWindow<Int>(limit: 4)
        w.add(7)
        var attempt = 0
        var backoffs: [UInt64] = []
        while let (call, a) = w.next() {
            XCTAssertEqual(call, 7)
            attempt = a
            switch w.refused(call, attempt: a) {
            case let .held(us):
                backoffs.append(us)
                XCTAssertNil(w.next(), "held until released")
                w.release()
            case .givenUp:
                XCTAssertEqual(a, CallWindow<Int>.attempts)
            case .queued:
                XCTFail("nothing else is out: no answer would release it")
            }
        }
        XCTAssertEqual(attempt, CallWindow<Int>.attempts, "tried exactly \(CallWindow<Int>.attempts) times")
        XCTAssertEqual(backoffs, [50_000, 100_000, 200_000, 400_000])
        XCTAssertEqual(w.limit, 1, "never below one: the window always moves")
        XCTAssertEqual(w.inFlight, 0)
    }

    func testDrainingGivesBackEveryWaitingCallAndEmptiesTheWindow() {
        var w = CallWindow<Int>(limit: 2)
        for i in 0..<5 { w.add(i) }
        _ = sendAll(&w)
        _ = w.refused(1, attempt: 1)
        XCTAssertEqual(w.drain(), [1, 2, 3, 4], "the refused one first, then the rest in order")
        XCTAssertEqual(w.inFlight, 0)
        XCTAssertEqual(w.waitingCount, 0)
        XCTAssertNil(w.next())
    }

    func testAQueueLongerThanItsCompactionKeepsItsOrder() {
        var w = CallWindow<Int>(limit: 1)
        var got: [Int] = []
        for i in 0..<300 {
            w.add(i)
            if i % 3 == 0, let n = w.next() {
                got.append(n.call)
                w.answered()
            }
        }
        while let n = w.next() {
            got.append(n.call)
            w.answered()
        }
        XCTAssertEqual(got, Array(0..<300))
    }
}
