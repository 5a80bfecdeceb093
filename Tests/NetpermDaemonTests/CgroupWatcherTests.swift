// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
@testable import NetpermDaemon
import NetpermIO
import TestSupport
import XCTest

/// The cgroup watcher on the test loop (whose clock moves only when told), scanning this machine's hierarchy.
final class CgroupWatcherTests: XCTestCase {
    /// A scope the daemon had made is scanned for at once (`scanSoon`), not after the debounce: its app joins the
    /// rules with its unit (docs/ENFORCEMENT.md, "What escapes"). Once the spacing after the last scan is over, the
    /// scan starts without the loop's clock moving at all.
    func testAScopeMadeIsScannedForWithoutTheDebounce() throws {
        let loop = TestLoop()
        var scans = 0
        let watcher = CgroupWatcher(loop: loop) { _ in scans += 1 }
        XCTAssertEqual(scans, 1, "the first scan, on the loop")
        let bound = Clock.monotonicMicroseconds() + CgroupWatcher.maxSpacingMicroseconds
        while Clock.monotonicMicroseconds() <= watcher.notBefore {
            XCTAssertLessThan(Clock.monotonicMicroseconds(), bound + 1_000)
            usleep(1_000)
        }
        watcher.scanSoon()
        XCTAssertTrue(loop.run(until: { scans == 2 }, timeout: 10), "scanned without the debounce")
    }
}
