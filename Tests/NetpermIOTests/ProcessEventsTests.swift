// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
@testable import NetpermIO
import XCTest

/// The process connector's messages as the kernel lays them out (`<linux/connector.h>`, `<linux/cn_proc.h>`), and
/// the real socket where the test may open it (root, the initial network namespace).
final class ProcessEventsTests: XCTestCase {
    private func parse(_ bytes: [UInt8]) -> [ProcessEvents.Event] { bytes.withUnsafeBytes { ProcessEvents.parse($0) } }

    func testAnExecsPidAndTgid() {
        XCTAssertEqual(parse(ProcessEvents.execDatagram(pid: 4243, tgid: 4242)),
                       [.exec(ProcessEvents.Exec(pid: 4243, tgid: 4242))])
        // Two messages in one datagram (the kernel sends one, a batch is still read whole).
        let two = ProcessEvents.execDatagram(pid: 1, tgid: 1) + ProcessEvents.execDatagram(pid: 2, tgid: 2)
        XCTAssertEqual(parse(two).count, 2)
    }

    func testOtherEventsAndForeignOrShortBytes() {
        XCTAssertEqual(parse(ProcessEvents.datagram(what: 1)), [.other], "a fork")
        XCTAssertEqual(parse(ProcessEvents.datagram(what: 0x80000000)), [.other], "an exit")
        XCTAssertEqual(parse(ProcessEvents.datagram(what: 0)), [.subscribed(error: 0)])
        var foreign = ProcessEvents.execDatagram(pid: 5, tgid: 5)
        foreign[Netlink.headerSize] = 2 // another connector's index
        XCTAssertEqual(parse(foreign), [.other])
        // The cn_msg's length cut below the exec's fields.
        var cut = ProcessEvents.execDatagram(pid: 5, tgid: 5)
        cut[Netlink.headerSize + 16] = 8
        cut[Netlink.headerSize + 17] = 0
        XCTAssertEqual(parse(cut), [.other])
        XCTAssertEqual(parse(Array(ProcessEvents.execDatagram(pid: 5, tgid: 5).prefix(20))), [])
        XCTAssertEqual(parse([]), [])
    }

    func testTheSubscriptionMessage() {
        let m = ProcessEvents.listenMessage()
        XCTAssertEqual(m.count, 16 + 20 + 4)
        XCTAssertEqual(Array(m[16..<24]), [1, 0, 0, 0, 1, 0, 0, 0], "CN_IDX_PROC, CN_VAL_PROC")
        XCTAssertEqual(Array(m[32..<34]), [4, 0], "4 bytes of data")
        XCTAssertEqual(Array(m[36..<40]), [1, 0, 0, 0], "PROC_CN_MCAST_LISTEN")
    }

    /// The kernel's own events: a child's exec is heard with its pid, within a bounded wait; its fork and exit (and
    /// every other process's) are not queued at all (the socket's filter).
    func testTheKernelTellsOfAnExec() throws {
        let fd: Int32
        do { fd = try ProcessEvents.open() } catch {
            throw XCTSkip("the process connector is not open to this test: \(error)")
        }
        defer { FD.close(fd) }
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { free(argv[0]) }
        XCTAssertEqual(posix_spawn(&pid, "/bin/true", nil, nil, &argv, environ), 0)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        var datagrams = EventDatagrams()
        var seen = false
        var others = 0
        let deadline = Clock.monotonicSeconds() + 5
        while !seen, Clock.monotonicSeconds() < deadline {
            _ = try FD.wait(fd, for: Int16(POLLIN), timeoutMilliseconds: 100)
            try datagrams.drain(fd, lost: { _ in }) { d in
                for event in ProcessEvents.parse(UnsafeRawBufferPointer(d)) {
                    switch event {
                    case let .exec(e): if e.tgid == pid { seen = true }
                    case .subscribed: break
                    case .other: others += 1
                    }
                }
            }
        }
        XCTAssertTrue(seen, "the exec of pid \(pid) was heard")
        XCTAssertEqual(others, 0, "forks and exits are dropped in the kernel")
    }

    /// What the exec watcher asks of every exec: the file /proc/PID/exe names, as a stat of that path says; nothing
    /// for a pid that names no process.
    func testTheFileAProcessRuns() throws {
        let own = try Files.fileID("/proc/self/exe")
        XCTAssertEqual(Files.executableID(pid: getpid()), own)
        XCTAssertNil(Files.executableID(pid: Int32.max))
    }
}
