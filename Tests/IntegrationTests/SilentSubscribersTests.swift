// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Clients that stall the daemon (issue 22, point 12): 2,000 subscribers that never read while a link with 700
/// addresses toggles. The daemon used to fill each one's 1 MiB queue (an RSS of 2.3 GB), took 19.5 s to
/// disconnect them (the time-out said 10 s), sent none of them the documented `overflow` line, answered a good
/// client's QUERY after up to 3.2 s, logged two lines per subscriber, and with that many descriptors open crashed
/// at the next rule load (libnftables' select(2)).
final class SilentSubscribersTests: IntegrationTestCase {
    static let subscribers = 2000
    static let timeout = 2.0

    func testTwoThousandSubscribersThatNeverReadStallNoOne() throws {
        XCTAssertGreaterThanOrEqual(ProcessStats.raiseOpenFiles(to: Self.subscribers + 256), Self.subscribers + 256)
        let ns = try makeNamespace()
        let peers = try makeNamespace()
        try ns.ip("link", "add", "wlan0", "type", "veth", "peer", "name", "wlan0p", "netns", peers.name)
        try ns.ip("link", "set", "wlan0", "up")
        try peers.ip("link", "set", "wlan0p", "up")
        let dir = try makeTempDir()
        try ns.batch((0..<700).map { "addr add 10.7.\($0 / 250).\($0 % 250 + 1)/32 dev wlan0" }, scratchDir: dir)
        let config = try writeConfig(IntegrationTestCase.standardConfig + """

            [Enforcement]
            Mode=block

            [App asker]
            User=4001
            WWAN=ask

            """, in: dir)
        let socket = dir + "/netpermd.sock"
        let d = try startDaemon(in: ns, socket: socket, config: config,
                                extraArgs: ["--subscriber-timeout", String(Int(Self.timeout))])
        try waitUntil("the rules are in force") {
            let e = try self.request(socket, "STATUS")["enforcement"] as? [String: Any]
            return (e?["state"] as? String == "enforcing", "\(e ?? [:])")
        }

        // Subscribers that send SUBSCRIBE and never read a byte.
        let clients = try (0..<Self.subscribers).map { _ in try RawClient(path: socket) }
        for c in clients { try c.send("SUBSCRIBE\n") }
        let silent = clients.map(\.fd)
        let client = try EvChannel.connect(socket, name: "good client")
        defer { client.close() }
        XCTAssertEqual(try client.request("PING", timeout: 30)["pong"] as? Bool, true, "all connected")
        // A subscriber that reads: once it has had this much, every silent one is behind (its socket holds about
        // 200 KiB, its queue 1 MiB), so from then on each must go within the time-out.
        let reader = try EvChannel.connect(socket, name: "reading subscriber")
        defer { reader.close() }
        try reader.send("SUBSCRIBE links\n")
        let behindAfter = (1 << 20) + (512 << 10)

        // The link toggles (at least 3 s, and until the silent ones are behind); meanwhile a good client asks every
        // few milliseconds, and decides twice (each decision loads rules, with more than 2,000 descriptors open).
        let stop = Locked(false)
        let toggles = Locked(0)
        let toggler = Thread {
            // Its own state, one change at a time: a change and its undoing read in one go are no change at all,
            // and the kernel passes on a carrier change (the peer's toggling) about once a second.
            while !stop.get() {
                _ = try? ns.ip("link", "set", "wlan0", toggles.get() % 2 == 0 ? "down" : "up")
                toggles.set(toggles.get() + 1)
            }
        }
        let start = monotonicNow()
        toggler.start()
        defer { stop.set(true) }
        var took: [Double] = []
        var closedAt = [Double?](repeating: nil, count: silent.count)
        var decided = 0
        var read = 0
        var behindAt: Double?
        func watchClosed() {
            var fds = silent.map { pollfd(fd: $0, events: Int16(0x2000), revents: 0) }   // POLLRDHUP
            _ = poll(&fds, nfds_t(fds.count), 0)
            for (i, p) in fds.enumerated() where closedAt[i] == nil && p.revents & Int16(0x2000 | POLLHUP) != 0 {
                closedAt[i] = monotonicNow() - start
            }
        }
        while monotonicNow() - start < 3 || (behindAt == nil && monotonicNow() - start < 20) {
            let t = monotonicNow()
            XCTAssertEqual(try client.request("QUERY asker", timeout: 10)["ok"] as? Bool, true)
            took.append(monotonicNow() - t)
            if decided < 2 && monotonicNow() - start > Double(decided + 1) {
                let r = try client.request("DECIDE asker wwan \(decided == 0 ? "allow" : "deny")", timeout: 10)
                XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
                decided += 1
            }
            read += try reader.readAvailable()
            while reader.bufferedLine() != nil {}
            if behindAt == nil && read >= behindAfter { behindAt = monotonicNow() - start }
            watchClosed()
            usleep(3000)
        }
        stop.set(true)
        try waitUntil("the toggling stopped") { (toggler.isFinished, "") }
        let behind = try XCTUnwrap(behindAt, "the reading subscriber got \(read) bytes in 20 s")
        try waitUntil("every silent subscriber is disconnected", timeout: Self.timeout + 5, interval: 0.05) {
            watchClosed()
            let open = closedAt.filter { $0 == nil }.count
            return (open == 0, "\(open) still connected after \(toggles.get()) toggles")
        }
        took.sort()
        let p99 = took[took.count * 99 / 100], worst = took.last ?? 0
        let hwm = try peakResident(d.pid)
        let lastClosed = closedAt.compactMap { $0 }.max() ?? 0
        print("silent subscribers: \(toggles.get()) toggles, \(took.count) queries, p99 \(Int(p99 * 1000)) ms, "
            + "slowest \(Int(worst * 1000)) ms; daemon peak RSS \(hwm >> 20) MiB; all behind by "
            + "\(String(format: "%.1f", behind)) s, the last disconnected at \(String(format: "%.1f", lastClosed)) s")

        XCTAssertTrue(d.isRunning, "the daemon runs")
        XCTAssertEqual(decided, 2)
        // Generous bounds for a debug build on a shared machine (113-360 ms p99 seen here; with the queues as they
        // were, a release build's p99 was 596 ms and a debug build could not get them behind in 20 s):
        // bench/bench.py's `silent` phase has the figures of a release build (p99 27 ms).
        XCTAssertLessThan(p99, 1, "a good client's QUERY p99")
        XCTAssertLessThan(worst, 2.5, "a good client's slowest QUERY")
        XCTAssertLessThan(hwm, 256 << 20, "all queues together are bounded (it was 2.3 GB)")
        XCTAssertLessThan(lastClosed, behind + Self.timeout + 1.5, "disconnected within the time-out of falling behind")

        // Each got what its socket held, then the overflow line, then the end of the stream.
        var withOverflow = 0
        for fd in silent {
            let tail = try readToEnd(fd)
            if tail.hasSuffix("\n{\"event\":\"overflow\"}\n") { withOverflow += 1 }
        }
        XCTAssertEqual(withOverflow, silent.count, "every silent subscriber's last line is the overflow line")
        let lines = d.log.split(separator: "\n").filter { $0.contains("subscriber fd") }
        XCTAssertLessThan(lines.count, 10, "rate-limited: \(lines.prefix(12).joined(separator: "\n"))")
        XCTAssertEqual(try request(socket, "STATUS")["ok"] as? Bool, true)
    }

    /// Reads a socket to its end; returns the last bytes.
    private func readToEnd(_ fd: Int32) throws -> String {
        var buf = [UInt8](repeating: 0, count: 65536)
        var last: [UInt8] = []
        let deadline = monotonicNow() + 10
        while monotonicNow() < deadline {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { return String(decoding: last, as: UTF8.self) }
            if n < 0 {
                guard errno == EAGAIN else { throw HarnessError("recv: \(String(cString: strerror(errno)))") }
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 100)
                continue
            }
            last = Array((last + buf[0..<n]).suffix(256))
        }
        throw HarnessError("no end of stream")
    }

    private func peakResident(_ pid: pid_t) throws -> Int {
        let status = try readProcFile("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else {
            throw HarnessError("no VmHWM in /proc/\(pid)/status")
        }
        return kb * 1024
    }
}
