// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Once start-up's work is done (READY=1 sent, the first desktop files and usage counters read) the daemon unmaps
/// the pages of its code and read-only data that start-up faulted in
/// (`CodePages.release()`, BENCHMARKS.md "RSS at idle"): the call must stay wired in, happen once, and leave a
/// daemon that works as before, its code coming back from the page cache.
final class FootprintTests: IntegrationTestCase {
    func testTheDaemonReleasesItsStartUpPagesOnceWhenReadyAndKeepsWorking() throws {
        let f = try makeFixture()
        func releaseLines() -> [Substring] {
            f.daemon.log.split(separator: "\n").filter { $0.contains("kB of code and read-only data pages") }
        }
        let lines = releaseLines()
        XCTAssertEqual(lines.count, 1, f.daemon.logTail)
        let words = try XCTUnwrap(lines.first).split(separator: " ")
        let kB = try XCTUnwrap(words.firstIndex(of: "kB").flatMap { Int(words[$0 - 1]) }, String(lines[0]))
        XCTAssertGreaterThan(kB, 1024, "start-up leaves megabytes of code mapped: \(lines[0])")
        // And its code comes back a page at a time: its mappings are registered with the userfaultfd that turns the
        // kernel's fault-around off (this kernel has its asynchronous write-protect mode).
        let onePage = try XCTUnwrap(words.firstIndex(of: "faulting").flatMap { Int(words[$0 - 3]) }, String(lines[0]))
        XCTAssertGreaterThan(onePage, 0, String(lines[0]))
        let smaps = try String(contentsOfFile: "/proc/\(f.daemon.pid)/smaps", encoding: .utf8)
        let entries = smaps.components(separatedBy: "\n")
        let header = try XCTUnwrap(entries.firstIndex { $0.contains(" r-xp ") && $0.hasSuffix("/netpermd") },
                                   "the daemon's code mapping")
        let flags = try XCTUnwrap(entries[header...].first { $0.hasPrefix("VmFlags:") })
        XCTAssertTrue(flags.split(separator: " ").contains("uw"), "registered for write-protect faults: \(flags)")

        XCTAssertEqual(try socat(f.socket, ["PING"]), [LifecycleTests.pong])
        XCTAssertTrue(try status(f.socket).ready)
        XCTAssertEqual(try request(f.socket, "RELOAD")["ok"] as? Bool, true)
        try f.ns.ip("link", "set", "wlan0p", "down")
        try waitForLinks(f.socket, "wlan0 loses its carrier") { $0[name: "wlan0"].map { !$0.carrier } ?? false }
        XCTAssertEqual(releaseLines().count, 1, "released once, at start-up only")
        XCTAssertTrue(f.daemon.isRunning)
    }
}
