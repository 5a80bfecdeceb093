// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import Glibc
@testable import NetpermDaemon
import NetpermCore
import NetpermHost
import NetpermIO
import TestSupport
import XCTest

/// The interpreter's edge objects on their own, on the test loop: each owns its state and its system calls, and
/// hands what it hears back as inputs.
final class EdgeObjectsTests: XCTestCase {
    private func feed() -> (InputFeed, () -> [Input]) {
        let f = InputFeed()
        var got: [Input] = []
        f.into = { got.append($0) }
        return (f, { got })
    }

    /// sysfs is read once per link, and again only when its name, addresses or default routes change; the networks
    /// the bus and nl80211 give join every picture.
    func testTheKernelPictureReadsSysfsOncePerLink() throws {
        let root = NSTemporaryDirectory() + "npt-picture-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let wireless = root + "/class/net/eth0/wireless"
        try FileManager.default.createDirectory(atPath: wireless, withIntermediateDirectories: true)
        var picture = KernelPicture(sysfs: Sysfs(root: root, proc: root + "/proc", run: root + "/run"))
        let eth = LinkFacts(index: 2, name: "eth0", arphrd: ARPHRD.ether, rtnlKind: nil, adminUp: true, carrier: true,
                            operstate: "up")
        var s = KernelSnapshot(links: [eth])
        XCTAssertEqual(picture.joined(s).sysfs[2]?.hasWireless, true)
        try FileManager.default.removeItem(atPath: wireless)
        XCTAssertEqual(picture.joined(s).sysfs[2]?.hasWireless, true, "not read again for the same link")
        s.addresses = [AddressFacts(index: 2, family: .ipv4, text: "192.0.2.1/24")]
        XCTAssertEqual(picture.joined(s).sysfs[2]?.hasWireless, false, "read again: its addresses changed")
        picture.managed = ["eth0": NetworkManagerDevice(metered: .yes, deviceType: 1)]
        XCTAssertEqual(picture.joined(s).managed.keys.sorted(), ["eth0"])
        XCTAssertEqual(picture.last?.addresses.count, 1)
    }

    /// A pidfd per process that asked: its exit is an input; a process gone already is one at once; unwatched, none.
    func testExitWatchHearsAnAskerExit() throws {
        let loop = TestLoop()
        let (f, got) = feed()
        let exits = ExitWatch(loop: loop, feed: f)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        defer { if child.isRunning { child.terminate() } }
        let pid = child.processIdentifier
        exits.watch(pid)
        XCTAssertEqual(exits.count, 1)
        kill(pid, SIGKILL)
        XCTAssertTrue(loop.run(until: { !got().isEmpty }, timeout: 10))
        guard case let .exited(p)? = got().first else { return XCTFail("\(got())") }
        XCTAssertEqual(p, pid)
        XCTAssertEqual(exits.count, 0, "its pidfd closed")
        child.waitUntilExit()
        // Gone (reaped): told at once.
        exits.watch(pid)
        XCTAssertEqual(got().count, 2)
        let other = Process()
        other.executableURL = URL(fileURLWithPath: "/bin/sleep")
        other.arguments = ["30"]
        try other.run()
        exits.watch(other.processIdentifier)
        exits.unwatch(other.processIdentifier)
        other.terminate()
        other.waitUntilExit()
        loop.runOnce(timeoutMilliseconds: 50)
        XCTAssertEqual(got().count, 2, "unwatched: no input")
    }

    /// Files are written off the loop; once the daemon stops, the usage totals on the loop, within the call.
    func testFileWritesGoOnTheLoopAtAStop() throws {
        final class Usage: UsageSaving, @unchecked Sendable {
            var threads: [pthread_t] = []
            let path = "/nonexistent/usage"
            func save(_ book: UsageBook) -> StoreOutcome {
                threads.append(pthread_self())
                return .stored
            }
        }
        final class Decisions: DecisionSaving, @unchecked Sendable {
            let path = "/nonexistent/decisions"
            func save(_ d: NetpermCore.Decisions) -> StoreOutcome { .stored }
        }
        let dir = NSTemporaryDirectory() + "npt-writes-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = TestLoop()
        let (f, got) = feed()
        let usage = Usage()
        let writes = FileWrites(loop: loop, decisions: Decisions(), usage: usage, tags: TagStore(stateDir: dir),
                                report: ReportStore(stateDir: dir), feed: f)
        writes.saveUsage(UsageBook())
        XCTAssertTrue(got().isEmpty, "off the loop: not within the call")
        XCTAssertTrue(loop.run(until: { got().count == 1 }, timeout: 10))
        XCTAssertNotEqual(usage.threads.first, pthread_self())
        writes.stopping()
        writes.saveUsage(UsageBook())
        XCTAssertEqual(got().count, 2, "at a stop: within the call")
        XCTAssertEqual(usage.threads.last, pthread_self())
        guard case .usageSaved(nil)? = got().last else { return XCTFail("\(got())") }
    }
}
