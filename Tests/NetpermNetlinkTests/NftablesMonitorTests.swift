// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Foundation
import Glibc
import NetpermCore
import NetpermIO
import NetpermNftables
import TestSupport
import XCTest

/// The nftables monitor around the daemon's own loads, against the real nf_tables of a network namespace of the
/// test's own (root; the host's ruleset is never touched).
final class NftablesMonitorTests: XCTestCase {
    /// The daemon's loop reads the ruleset's generation right after each of its commits (`listen`). A netfilter
    /// socket opened and closed for that makes the closing wait in the kernel for the commit's destruction work, an
    /// RCU grace period (4-16 ms here): every exec, QUERY and scope's answer of that moment waited behind it (bench
    /// figure 23's tail). With the socket kept, reading the generation is a request and its answer.
    func testReadingTheGenerationAfterACommitWaitsForNoGracePeriod() throws {
        let ns = try ownNamespace("monitor")
        defer { _ = try? command(["ip", "netns", "del", ns]) }
        try command(["ip", "netns", "exec", ns, "nft",
                     "add table inet netpermd; add map inet netpermd uid_wwan { type uid : verdict; }"])
        var waits: [UInt64] = []
        try inNamespace("/run/netns/\(ns)") {
            let monitor = try NftablesMonitor(loop: TestLoop(), tables: ["netpermd"])
            // The load's socket, kept as the daemon keeps its own.
            let committer = try NftablesElements.socket()
            for i in 0..<15 {
                // What the last round added is replaced: the kernel frees what a commit deleted after a grace
                // period (an element only added is freed at once).
                let change = ElementChanges(commands: [.flush(map: "uid_wwan"), .add(map: "uid_wwan", elements: [
                    .init(key: .number(UInt32(1000 + i)), value: .accept)])])
                monitor.quiet()
                XCTAssertEqual(NftablesElements.run(change, on: committer, for: .loadUnitElements), .committed)
                let start = Clock.monotonicMicroseconds()
                // One commit since `quiet`, the test's own: no one else's.
                XCTAssertFalse(monitor.listen(ownCommits: 1), "round \(i)")
                waits.append(Clock.monotonicMicroseconds() - start)
            }
        }
        let median = waits.sorted()[waits.count / 2]
        XCTAssertLessThan(median, 2_000, "reading the generation after a commit took (µs): \(waits)")
    }

    /// The Enforcer asks on its loop whether its tables exist before a whole load (a Mode change, a repair after
    /// another process deleted them). Over a socket made and closed per question, the close after a commit that
    /// removed anything waited for an RCU grace period (4-40 ms) on the loop; the monitor's kept socket is asked.
    func testAKeptSocketsTableLookupsWaitForNoGracePeriod() throws {
        let ns = try ownNamespace("lookup")
        defer { _ = try? command(["ip", "netns", "del", ns]) }
        var lookups: [UInt64] = []
        try inNamespace("/run/netns/\(ns)") {
            let nft = try Nftables()
            let monitor = try NftablesMonitor(loop: TestLoop(), tables: ["netpermd"])
            for i in 0..<15 {
                // Each round removes a table another process made: freed after a grace period.
                try nft.run("add table inet netpermd; delete table inet netpermd")
                nft.dropCache()
                let start = Clock.monotonicMicroseconds()
                XCTAssertEqual(try monitor.tableExists("netpermd"), false, "round \(i)")
                lookups.append(Clock.monotonicMicroseconds() - start)
            }
            try nft.run("add table inet netpermd")
            XCTAssertEqual(try monitor.tableExists("netpermd"), true)
        }
        XCTAssertLessThan(lookups.sorted()[lookups.count / 2], 2_000, "a lookup after a removal took (µs): \(lookups)")
    }

    /// The Enforcer's loads that add or remove chains go through libnftables. A context made and freed for each load
    /// closed its socket after the commit, and after a commit that removed anything that close waits for an RCU
    /// grace period holding the ruleset's commit lock (8-31 ms here): the next load, a new app's, waited behind it
    /// (figure 23 with no other app running). The context is kept and only its cache dropped.
    func testAKeptContextsLoadsWaitForNoGracePeriod() throws {
        let ns = try ownNamespace("context")
        defer { _ = try? command(["ip", "netns", "del", ns]) }
        var loads: [UInt64] = []
        try inNamespace("/run/netns/\(ns)") {
            let nft = try Nftables()
            try nft.run("add table inet netpermd")
            for i in 0..<16 {
                let start = Clock.monotonicMicroseconds()
                // Every other load removes what the one before added: what a commit deleted is freed after a grace
                // period.
                try nft.run(i % 2 == 0 ? "add chain inet netpermd app_\(i)" : "delete chain inet netpermd app_\(i - 1)")
                nft.dropCache()
                loads.append(Clock.monotonicMicroseconds() - start)
            }
            XCTAssertEqual(try nft.run("list table inet netpermd").contains("app_"), false, "every chain added went")
        }
        // The removals are the loads whose end would wait (a median of all would sit between the two halves).
        let removals = loads.enumerated().filter { $0.offset % 2 == 1 }.map(\.element).sorted()
        XCTAssertLessThan(removals[removals.count / 2], 2_000, "a load and its cache dropped took (µs): \(loads)")
    }

    /// A network namespace of the test's own (`npt-PID-SUFFIX`), made for it; the caller deletes it (a `defer`).
    private func ownNamespace(_ suffix: String) throws -> String {
        guard getuid() == 0 else { throw XCTSkip("needs root: a network namespace of its own") }
        let ns = "npt-\(getpid())-\(suffix)"
        try command(["ip", "netns", "add", ns])
        return ns
    }

    /// Runs `body` with the calling thread in the network namespace `path` names (its sockets stay there), then
    /// back in its own.
    private func inNamespace(_ path: String, _ body: () throws -> Void) throws {
        let own = Glibc.open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        let target = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        defer {
            if own >= 0 { close(own) }
            if target >= 0 { close(target) }
        }
        guard own >= 0, target >= 0, setns(target, NP_CLONE_NEWNET) == 0 else {
            throw Errno(errno)
        }
        defer { precondition(setns(own, NP_CLONE_NEWNET) == 0, "cannot go back to the test's own namespace") }
        try body()
    }

    private func command(_ argv: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = argv
        try p.run()
        p.waitUntilExit()
        if p.terminationStatus != 0 { throw Errno(EPROTO) }
    }
}
