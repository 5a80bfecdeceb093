// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import TestSupport
import XCTest

/// The one worker every edge's slow work goes through (Worker, OnceMore), on the test loop: a job's thread is held on a
/// pipe until the test lets it go, so what runs where and in what order is seen, not timed.
final class WorkerTests: XCTestCase {
    /// A gate a job's thread waits at (5 s at most): `open()` lets one job through.
    final class Gate: @unchecked Sendable {
        let fds: (read: Int32, write: Int32)
        init() {
            var p: [Int32] = [0, 0]
            precondition(pipe(&p) == 0)
            fds = (p[0], p[1])
        }
        deinit { close(fds.read); close(fds.write) }
        /// Bounded: a job wrongly run on the loop must not hang the test.
        func wait() {
            var p = pollfd(fd: fds.read, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 5000) == 1 else { return }
            var b: UInt8 = 0
            _ = read(fds.read, &b, 1)
        }
        func open() {
            var b: UInt8 = 1
            _ = write(fds.write, &b, 1)
        }
    }

    /// Free: the job runs on another thread and its result comes back on the loop, only as the loop serves it. Busy:
    /// the next runs on the loop, within the call.
    func testOffTheLoopWhenFreeOnTheLoopWhenBusy() {
        let loop = TestLoop()
        let worker = Worker<UInt>(loop: loop, doing: "testing")
        let gate = Gate()
        let loopThread = pthread_self()
        var results: [(UInt, UInt)] = []
        worker.run({ gate.wait(); return pthread_self() }) { results.append(($0, pthread_self())) }
        XCTAssertTrue(worker.busy)
        XCTAssertTrue(results.isEmpty, "not run within the call")
        worker.run({ pthread_self() }) { results.append(($0, pthread_self())) }
        XCTAssertEqual(results.count, 1, "busy: run on the loop, within the call")
        XCTAssertEqual(results.first?.0, loopThread)
        gate.open()
        XCTAssertTrue(loop.run(until: { results.count == 2 }, timeout: 10))
        XCTAssertNotEqual(results[1].0, loopThread, "the first ran on a thread of its own")
        XCTAssertEqual(results[1].1, loopThread, "its result handed back on the loop's thread")
        XCTAssertFalse(worker.busy)
    }

    /// `skipped`: a job the busy thread cannot take is not done at all (the slow work never lands on the loop).
    func testSkippedWhenBusyIsNotRunOnTheLoop() {
        let loop = TestLoop()
        let worker = Worker<Int>(loop: loop, doing: "testing", fallback: .skipped)
        let gate = Gate()
        var done: [Int] = []
        worker.run({ gate.wait(); return 1 }) { done.append($0) }
        worker.run({ 2 }) { done.append($0) }
        gate.open()
        XCTAssertTrue(loop.run(until: { !worker.busy }, timeout: 10))
        XCTAssertEqual(done, [1])
    }

    /// At a stop every job runs on the loop, within the call, even with the thread free.
    func testOnLoopNow() {
        let worker = Worker<UInt>(loop: TestLoop(), doing: "testing")
        worker.onLoopNow = true
        var ran: UInt?
        worker.run({ pthread_self() }) { ran = $0 }
        XCTAssertEqual(ran, pthread_self())
        XCTAssertFalse(worker.busy)
    }

    /// One job at a time, in order; of those that come while one runs only the latest runs, after it, and each
    /// `then` that runs runs once.
    func testTheLatestWaits() {
        let loop = TestLoop()
        let worker = Worker<Int>(loop: loop, doing: "testing")
        let gate = Gate()
        var done: [Int] = []
        for n in 1...4 { worker.runLatest({ gate.wait(); return n }) { done.append($0) } }
        XCTAssertEqual(done, [], "none on the loop: they wait for the thread")
        gate.open()
        XCTAssertTrue(loop.run(until: { done == [1] }, timeout: 10))
        XCTAssertTrue(worker.busy, "the latest started once the first was handed back")
        gate.open()
        XCTAssertTrue(loop.run(until: { !worker.busy }, timeout: 10))
        XCTAssertEqual(done, [1, 4])
    }

    /// What is to happen after the job on the thread runs once, after its `then`, the latest given; nothing on the
    /// thread: not kept.
    func testAfterRunsOnceAfterTheResult() {
        let loop = TestLoop()
        let worker = Worker<Int>(loop: loop, doing: "testing")
        var order: [String] = []
        XCTAssertFalse(worker.after { order.append("never") })
        let gate = Gate()
        worker.run({ gate.wait(); return 1 }) { _ in order.append("result") }
        XCTAssertTrue(worker.after { order.append("first") })
        XCTAssertTrue(worker.after { order.append("again") })
        gate.open()
        XCTAssertTrue(loop.run(until: { order.count == 2 }, timeout: 10))
        XCTAssertEqual(order, ["result", "again"])
    }

    /// A job's `then` may give the thread its next job (a queue's next load): it goes to the thread, not the loop.
    func testThenGivesTheThreadItsNextJob() {
        let loop = TestLoop()
        let worker = Worker<UInt>(loop: loop, doing: "testing")
        var threads: [UInt] = []
        worker.run({ pthread_self() }) { first in
            threads.append(first)
            worker.run({ pthread_self() }) { threads.append($0) }
        }
        XCTAssertTrue(loop.run(until: { threads.count == 2 }, timeout: 10))
        XCTAssertFalse(threads.contains(pthread_self()), "neither ran on the loop")
    }

    /// Its core as a value: one in flight, the latest asked for kept, handed back when the one in flight ends.
    func testOnceMore() {
        var turns = OnceMore<Int>()
        XCTAssertEqual(turns.ask(1), 1)
        XCTAssertNil(turns.ask(2))
        XCTAssertNil(turns.ask(3))
        XCTAssertEqual(turns.waiting, 3)
        XCTAssertEqual(turns.finished(), 3)
        XCTAssertFalse(turns.running)
        XCTAssertNil(turns.waiting)
        XCTAssertEqual(turns.ask(3), 3)
        XCTAssertNil(turns.finished())
        XCTAssertFalse(turns.running)
    }
}
