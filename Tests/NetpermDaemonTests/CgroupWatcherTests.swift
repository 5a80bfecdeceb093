// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
@testable import NetpermDaemon
import NetpermIO
import TestSupport
import XCTest

/// The cgroup watcher on the test loop (whose clock moves only when told), scanning this machine's hierarchy.
final class CgroupWatcherTests: XCTestCase {
    /// A scope the daemon had made is scanned for at once (`scanSoon`), not after the debounce: its app joins the
    /// rules with its unit (docs/ENFORCEMENT.md, "What escapes"). Right after a scan (the debounce's floor still
    /// ahead), the next starts without the loop's clock moving at all; asked for while a scan runs, it starts as
    /// soon as that one is handed over.
    func testAScopeMadeIsScannedForWithoutTheDebounce() throws {
        let loop = TestLoop()
        var scans = 0
        let watcher = CgroupWatcher(loop: loop) { _ in scans += 1 }
        XCTAssertEqual(scans, 1, "the first scan, on the loop")
        // Twice what handing the first scan over cost (a counter): microseconds.
        XCTAssertLessThan(watcher.soonNotBefore, watcher.notBefore)
        while Clock.monotonicMicroseconds() <= watcher.soonNotBefore { usleep(100) }
        XCTAssertLessThan(Clock.monotonicMicroseconds(), watcher.notBefore, "the debounce's floor is still ahead")
        watcher.scanSoon()
        XCTAssertTrue(watcher.scanning, "started at once")
        watcher.scanSoon()
        XCTAssertTrue(loop.run(until: { scans == 2 }, timeout: 10))
        // The second waits only for twice the hand-over's cost, less than the debounce by far.
        loop.advance(byMicroseconds: CgroupWatcher.debounceMicroseconds - 1)
        XCTAssertTrue(loop.run(until: { scans == 3 }, timeout: 10), "the one asked for meanwhile, before the debounce")
    }
}
