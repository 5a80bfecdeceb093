// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A client already connected keeps its latency while thousands of others connect at once. Issue 14, defect 10:
/// after a burst of 5,000 connects one QUERY took 392-442 ms, because the daemon accepted the whole backlog in one
/// pass of its loop and read /proc for each connection (~106 us) before it served anyone else.
final class ConnectBurstTests: IntegrationTestCase {
    /// The worst round trip allowed during the burst. An idle QUERY takes well under 1 ms (debug build); a pass of
    /// the loop accepts a bounded batch of connections, which costs a few milliseconds at most, and the rest is the
    /// scheduler on a shared machine. The defect was eight times this.
    static let bound = 0.050

    func testAQueryingClientKeepsItsLatencyWhileFiveThousandConnect() throws {
        // Each connection is a descriptor here and one in the daemon (which raises its soft limit to the hard one).
        let limit = ProcessStats.raiseOpenFiles(to: 5000 + 512)
        let n = min(5000, limit - 512)
        XCTAssertGreaterThanOrEqual(n, 1000, "RLIMIT_NOFILE (\(limit)) leaves too few descriptors for a burst")
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(in: dir)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config)

        // A client polling QUERY, as a well-behaved app does: connected, identified and answered before the burst.
        let good = try RawClient(path: socket)
        var idle: [Double] = []
        for _ in 0..<200 {
            let t = monotonicNow()
            XCTAssertEqual(try good.request("QUERY")?.hasPrefix(#"{"ok":true"#), true)
            idle.append(monotonicNow() - t)
        }

        let outcome = Locked<String?>(nil)
        let burst = Locked<[RawClient]>([])
        let started = monotonicNow()
        let thread = Thread {
            var clients: [RawClient] = []
            do {
                for _ in 0..<n { clients.append(try RawClient(path: socket, timeout: 30)) }
                // The backlog is accepted in order: once the last one is answered, every one was accepted.
                let last = try clients.last?.request("PING", timeout: 30)
                outcome.set(last == #"{"ok":true,"pong":true}"# ? "ok" : "the last connection got \(last ?? "EOF")")
            } catch {
                outcome.set("connection \(clients.count + 1) of \(n): \(error)")
            }
            burst.set(clients)
        }
        thread.start()
        var during: [Double] = []
        let deadline = monotonicNow() + 60
        while outcome.get() == nil && monotonicNow() < deadline {
            let t = monotonicNow()
            let reply = try good.request("QUERY", timeout: 10)
            during.append(monotonicNow() - t)
            XCTAssertEqual(reply?.hasPrefix(#"{"ok":true"#), true, reply ?? "EOF")
        }
        let took = monotonicNow() - started
        while outcome.get() == nil && monotonicNow() < deadline + 30 { usleep(10_000) }
        XCTAssertEqual(outcome.get(), "ok", "the burst of \(n) connections")
        let daemonFDs = try ProcessStats.openDescriptors(daemon.pid)
        burst.set([])

        let worst = during.max() ?? 0
        let sorted = during.sorted()
        let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        let idleMedian = idle.sorted()[idle.count / 2]
        print(String(format: "connect burst: %d connections in %.0f ms; good client's QUERY: %d during the burst, "
                     + "median %.2f ms, worst %.2f ms; idle median %.3f ms; the daemon held %d descriptors",
                     n, took * 1000, during.count, median * 1000, worst * 1000, idleMedian * 1000, daemonFDs))
        XCTAssertGreaterThan(during.count, 10, "the good client asked throughout the burst")
        XCTAssertGreaterThanOrEqual(daemonFDs, n, "the daemon held every connection of the burst at once")
        XCTAssertLessThan(worst, Self.bound, String(format: "worst QUERY round trip during a burst of %d connects: %.1f ms",
                                                   n, worst * 1000))
    }
}
