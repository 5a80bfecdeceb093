// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 27 against the real kernel (docs/USAGE.md): real traffic between veth pairs in test namespaces, counted by
/// the daemon's table and compared with what the peer's own nft counters saw of the same flows and with the links'
/// own counters; counts that survive a SIGHUP loading the whole enforcement table, a restart and a SIGKILL (with
/// traffic while no daemon runs); a budget of 1 MiB that ends a TCP transfer at once both ways, its reset and the
/// next period; and what an unprivileged user sees. Nothing here touches the host's ruleset.
final class UsageTests: IntegrationTestCase {
    static let sender: UInt32 = 4101, receiver: UInt32 = 4102

    static func policy(mode: String, budget: String = "", save: Int = 60, extra: String = "") -> String {
        """
        [Usage]
        Count=yes
        SaveIntervalSec=\(save)

        [Enforcement]
        Mode=\(mode)

        [Interface wwan0]
        Kind=wwan

        [Interface eth0]
        Kind=ethernet

        [Defaults]
        WWAN=allow

        [App sender]
        User=\(sender)
        \(budget.isEmpty ? "" : "MeteredBudget=" + budget)

        [App receiver]
        User=\(receiver)
        \(extra)
        """
    }

    private var bed: UsageBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    private var clockFile: String { dir + "/clock-offset" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        dir = try makeTempDir()
        chmod(dir, 0o755)   // the socket is reached by an unprivileged user too
        bed = try UsageBed(self, dir: dir)
        try "0 synchronized\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
        showOnFailure("nft list ruleset") {
            (try? Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "ruleset"]).stdout) ?? "?"
        }
    }

    @discardableResult
    private func start(_ config: String) throws -> DaemonProcess {
        let path = try writeConfig(config, in: dir)
        let d = try startDaemon(in: bed.ns, socket: socket, config: path, extraArgs: ["--clock-offset-file", clockFile],
                                nsenter: true)
        try waitUntil("counting is in force") {
            let u = try self.request(self.socket, "STATUS")["usage"] as? [String: Any]
            return (u?["state"] as? String == "counting", "\(u ?? [:])")
        }
        return d
    }

    /// USAGE's totals of `app` ("other" for other processes) this period on `kind`/`metered`, each way.
    private func counted(_ app: String, kind: String, metered: Bool, period: String = "current",
                         from reply: [String: Any]? = nil) throws -> (sent: Int, received: Int, sentPackets: Int, receivedPackets: Int) {
        let r = try reply ?? request(socket, "USAGE")
        let entry: [String: Any]?
        if app == "other" {
            entry = r["other"] as? [String: Any]
        } else {
            entry = (r["apps"] as? [[String: Any]])?.first { $0["app"] as? String == app }
        }
        let kinds = ((entry?[period] as? [String: Any])?["kinds"] as? [[String: Any]]) ?? []
        guard let k = kinds.first(where: { $0["kind"] as? String == kind && $0["metered"] as? Bool == metered }) else {
            return (0, 0, 0, 0)
        }
        return (k["sent_bytes"] as? Int ?? 0, k["received_bytes"] as? Int ?? 0, k["sent_packets"] as? Int ?? 0,
                k["received_packets"] as? Int ?? 0)
    }

    /// Within 1% of `truth` (and exactly for what is not segmented).
    private func assertClose(_ value: Int, _ truth: Int, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertGreaterThan(truth, 0, what, file: file, line: line)
        let off = abs(Double(value - truth)) / Double(max(truth, 1))
        XCTAssertLessThanOrEqual(off, 0.01, "\(what): counted \(value), the peer's kernel \(truth)", file: file, line: line)
        print("usage accuracy: \(what): counted \(value), peer \(truth), off \(String(format: "%.4f", off * 100))%")
    }

    /// Mode=off (a counting-only table): each app's bytes, TCP bulk and UDP, sent and received, per kind, within 1%
    /// of what the peer's kernel counted of the same flows; every app and other processes together are exactly what
    /// the links carried (their counters, less 14 bytes of Ethernet header a frame); a user sees only their apps.
    func testEveryByteIsCountedAsItsAppAndTheRestAsOtherProcesses() throws {
        try start(Self.policy(mode: "off"))
        let wwanBefore = try bed.linkCounters("wwan0"), ethBefore = try bed.linkCounters("eth0")
        let base = try request(socket, "USAGE")
        func classTotal(_ r: [String: Any], _ kind: String, _ metered: Bool) throws -> (Int, Int, Int, Int) {
            var t = (0, 0, 0, 0)
            for app in ["sender", "receiver", "other"] {
                let c = try counted(app, kind: kind, metered: metered, from: r)
                t = (t.0 + c.sent, t.1 + c.sentPackets, t.2 + c.received, t.3 + c.receivedPackets)
            }
            return t
        }
        let wwanBase = try classTotal(base, "wwan", true), ethBase = try classTotal(base, "ethernet", false)

        // TCP bulk, sent, over the metered wwan0.
        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(8 << 20))
        XCTAssertNil(up["error"] as? String, "\(up)")
        var peerIn = try bed.peerCounter("sink_in"), peerOut = try bed.peerCounter("sink_out")
        var c = try counted("sender", kind: "wwan", metered: true)
        assertClose(c.sent, peerIn.bytes, "TCP sent (wwan, metered)")
        assertClose(c.received, peerOut.bytes, "TCP received (its ACKs)")
        // TCP bulk, received, over eth0.
        let down = try bed.client(uid: Self.receiver, "download", "eth0", String(8 << 20))
        XCTAssertEqual(down["received"] as? Int, 8 << 20, "\(down)")
        let src = (try bed.peerCounter("source_out"), try bed.peerCounter("source_in"))
        let r = try counted("receiver", kind: "ethernet", metered: false)
        assertClose(r.received, src.0.bytes, "TCP received (ethernet)")
        assertClose(r.sent, src.1.bytes, "TCP sent (its ACKs)")
        // UDP both ways over wwan0: 2,000 datagrams of 1,000 bytes and their echoes.
        let before = c
        let udp = try bed.client(uid: Self.sender, "udp", "wwan0", "2000", "1000")
        XCTAssertEqual(udp["echoed"] as? Int, 2000, "\(udp)")
        peerIn = try bed.peerCounter("echo_in")
        peerOut = try bed.peerCounter("echo_out")
        c = try counted("sender", kind: "wwan", metered: true)
        XCTAssertEqual(c.sent - before.sent, peerIn.bytes, "UDP sent: every datagram, exactly")
        XCTAssertEqual(c.received - before.received, peerOut.bytes, "UDP received, exactly")
        XCTAssertEqual(peerIn.bytes, 2000 * 1028)
        // Root is in no [App]: other processes.
        let other = try bed.client(uid: nil, "udp", "eth0", "200", "500")
        XCTAssertEqual(other["echoed"] as? Int, 200, "\(other)")

        // Everyone together is what the links carried, frame by frame.
        let after = try request(socket, "USAGE")
        XCTAssertEqual(try counted("other", kind: "ethernet", metered: false, from: after).sent, 200 * 528)
        let wwan = try bed.linkCounters("wwan0"), eth = try bed.linkCounters("eth0")
        let wwanNow = try classTotal(after, "wwan", true), ethNow = try classTotal(after, "ethernet", false)
        for (name, now, was, link, linkWas) in [("wwan0", wwanNow, wwanBase, wwan, wwanBefore),
                                                ("eth0", ethNow, ethBase, eth, ethBefore)] {
            let txPackets = link.txPackets - linkWas.txPackets, rxPackets = link.rxPackets - linkWas.rxPackets
            XCTAssertEqual(now.1 - was.1, txPackets, "\(name): packets sent")
            XCTAssertEqual(now.3 - was.3, rxPackets, "\(name): packets received")
            XCTAssertEqual(now.0 - was.0, link.txBytes - linkWas.txBytes - 14 * txPackets, "\(name): bytes sent")
            XCTAssertEqual(now.2 - was.2, link.rxBytes - linkWas.rxBytes - 14 * rxPackets, "\(name): bytes received")
            print("usage totals: \(name): \(txPackets) frames sent, \(rxPackets) received, all counted")
        }

        // The same counts as Prometheus counters, which promtool accepts.
        let metrics = try ctl(["--socket", socket, "metrics"])
        XCTAssertEqual(metrics.status, 0, metrics.summary)
        let sinceReset = try counted("sender", kind: "wwan", metered: true, period: "since_reset")
        for (series, value) in [("netpermd_app_sent_bytes_total", sinceReset.sent),
                                ("netpermd_app_received_packets_total", sinceReset.receivedPackets)] {
            XCTAssertTrue(metrics.stdout.contains("\(series){app=\"sender\",kind=\"wwan\",metered=\"true\"} \(value)\n"),
                          "\(series) \(value): \(metrics.stdout)")
        }
        let promtool = try Repository.requireTool("promtool", package: "prometheus")
        let check = try Subprocess.run([promtool, "check", "metrics"], input: Array(metrics.stdout.utf8))
        XCTAssertEqual(check.status, 0, check.summary)
        XCTAssertEqual(check.stdout + check.stderr, "", "promtool has nothing to say")

        // An unprivileged user sees their own apps only: no one else's, no other processes, no reset.
        func asSender(_ args: [String]) throws -> CommandResult {
            try Subprocess.run(["setpriv", "--reuid", "\(Self.sender)", "--regid", "\(Self.sender)", "--clear-groups",
                                netpermctl, "--socket", socket] + args)
        }
        let human = try asSender(["usage"])
        XCTAssertEqual(human.status, 0, human.summary)
        XCTAssertTrue(human.stdout.contains("sender"), human.stdout)
        XCTAssertFalse(human.stdout.contains("receiver") || human.stdout.contains("other processes"), human.stdout)
        let terse = try asSender(["-t", "usage"])
        XCTAssertEqual(Set(terse.lines.map { String($0.prefix { $0 != ":" }) }), ["sender"], terse.stdout)
        let theirs = try asSender(["usage", "receiver"])
        XCTAssertEqual(theirs.status, 1, theirs.summary)
        XCTAssertTrue(theirs.stderr.contains("not-found"), "as an app that does not exist: \(theirs.summary)")
        XCTAssertEqual(try asSender(["usage", "reset"]).status, 1)
        let all = try ctl(["--socket", socket, "-t", "usage"])
        XCTAssertEqual(Set(all.lines.map { String($0.prefix { $0 != ":" }) }), ["sender", "receiver", ""], all.stdout)
    }

    /// Counts survive a SIGHUP that loads the whole enforcement table while a sender runs, a restart and a SIGKILL
    /// (with traffic while no daemon runs: the table goes on counting), and Mode=steer: the peer's kernel received
    /// exactly what the daemon counted. Count=no then removes the table.
    func testCountsSurviveAWholeLoadARestartAndAKill() throws {
        var daemon = try start(Self.policy(mode: "block"))
        func sentOverWWAN() throws -> Int { try counted("sender", kind: "wwan", metered: true).sent }
        func peerGot() throws -> Int { try bed.peerCounter("echo_in").bytes }

        // A sender of 300 datagrams over about a second, and a reload in its middle that replaces the whole table.
        let pacer = try Subprocess.spawn(["nsenter", "--net=/run/netns/\(bed.ns.name)", "setpriv", "--reuid", "\(Self.sender)",
                                          "--regid", "\(Self.sender)", "--clear-groups", UsageBed.python, "-c",
                                          UsageBed.clientScript, "pace", "10.31.0.2", "300", "500", "3"],
                                         stdin: .devNull, stdout: .appendFile(dir + "/pacer.log"), stderr: .appendFile(dir + "/pacer.log"))
        addTeardownBlock { pacer.killAndReap() }
        try waitUntil("the sender is sending") { (try peerGot() > 10 * 528, "\(try peerGot())") }
        let many = (1...40).map { "[App filler\($0)]\nUser=\(5000 + $0)\nWWAN=deny\n" }.joined(separator: "\n")
        _ = try writeConfig(Self.policy(mode: "block", extra: many), in: dir)
        daemon.signal(SIGHUP)
        try waitUntil("the reload is in force") {
            let p = try self.request(self.socket, "STATUS")["policy"] as? [String: Any]
            return (p?["generation"] as? Int == 2, "\(p ?? [:])")
        }
        XCTAssertEqual(pacer.wait(timeout: 20), 0)
        let loads = daemon.log.split(separator: "\n").filter { $0.contains("enforcement: loading rules for") }
        XCTAssertTrue(loads.last.map { !$0.contains("changes only") } ?? false, "the reload loaded the whole table: \(loads)")
        XCTAssertEqual(try peerGot(), 300 * 528)
        XCTAssertEqual(try sentOverWWAN(), try peerGot(), "nothing lost across a whole load")

        // A restart, with traffic while no daemon runs.
        stopDaemon(daemon)
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "wwan0", "100", "500")["echoed"] as? Int, 100)
        daemon = try start(Self.policy(mode: "block"))
        XCTAssertEqual(try sentOverWWAN(), try peerGot(), "a restart loses nothing")

        // SIGKILL, long before the next save (SaveIntervalSec=60): the kernel counted on, and the next process reads on
        // from the counters the last save recorded.
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "wwan0", "100", "500")["echoed"] as? Int, 100)
        daemon.signal(SIGKILL)
        XCTAssertNotNil(daemon.waitForExit(timeout: 5))
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "wwan0", "50", "500")["echoed"] as? Int, 50)
        daemon = try start(Self.policy(mode: "block"))
        XCTAssertEqual(try sentOverWWAN(), try peerGot(), "a crash of the daemon loses nothing (at most SaveIntervalSec= was allowed)")

        // Mode=steer counts the same.
        _ = try writeConfig(Self.policy(mode: "steer"), in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "wwan0", "100", "500")["echoed"] as? Int, 100)
        XCTAssertEqual(try sentOverWWAN(), try peerGot(), "steer mode counts too")

        // Count=no: the last counts are saved and the table goes.
        _ = try writeConfig(Self.policy(mode: "off").replacingOccurrences(of: "Count=yes", with: "Count=no"), in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        try waitUntil("the counting table is gone") {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "table", "inet",
                                        "netpermd_usage"])
            return (r.status != 0, r.stdout)
        }
        let file = try String(contentsOfFile: dir + "/state/usage", encoding: .utf8)
        XCTAssertTrue(file.contains("app sender current wwan_metered \(try peerGot()) "), file)
    }

    /// A 1 MiB budget on metered links (Mode=block): a TCP upload over wwan0 ends at once with a reset the sender
    /// sees, within the next packets past the budget; the verdict says budget-exhausted, agents hear 80% and 100%, new
    /// connections are refused and Ethernet still works; a reset opens it; a download ends at once too, both ends
    /// reset; and the next period (the clock moved, not a month waited) moves the totals and opens it again.
    /// Issue 31, point 1: the kernel's "quota used up" notice carries the packet's family (ip, ip6), not the inet of
    /// the usage table, and was dropped: QUERY said `ok` with nothing used, and no 80% or 100% event came, until the
    /// next SaveIntervalSec= reading (59.6 s with the default). With a reading only every hour, the app's verdict,
    /// the 80% and 100% events and QUERY's budget follow the kernel's notices at once.
    func testTheKernelsBudgetNoticeIsHeardAtOnce() throws {
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        try start(Self.policy(mode: "block", budget: "1M", save: 3600))
        let agent = try LiveConnection(path: socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("usage apps")
        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(4 << 20))
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(up["error"] as? String ?? ""), "the kernel ended it: \(up)")
        let events = try agent.objects(until: "the verdict says budget-exhausted", timeout: 5) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "budget-exhausted"
        }
        XCTAssertEqual(events.filter { $0["event"] as? String == "usage" }.map { $0["percent"] as? Int }, [80, 100], "\(events)")
        let b = try XCTUnwrap(try request(socket, "QUERY sender")["budget"] as? [String: Any])
        XCTAssertEqual(b["exhausted"] as? Bool, true, "\(b)")
        XCTAssertGreaterThan(b["used"] as? Int ?? 0, (1 << 20) - (66 << 10), "what the kernel counted: \(b)")
    }

    /// Issue 31, points 2, 4 and 5 against the kernel: a restart while the budget is used up keeps it used up (the
    /// verdict said ok while the kernel refused); a reset is answered once its quota is made again (8 of 10
    /// connects right after `usage reset` were refused); raising the budget of a used-up app opens it (the quota
    /// was made with `used` at the new limit, and a 1 MB upload was refused).
    func testBudgetsSurviveARestartAResetAndARaise() throws {
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        var daemon = try start(Self.policy(mode: "block", budget: "1M"))
        func reason() throws -> String? { try request(socket, "QUERY sender")["reason"] as? String }
        func exhaust() throws {
            let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(4 << 20))
            XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(up["error"] as? String ?? ""), "the kernel ended it: \(up)")
            try waitUntil("budget-exhausted") { (try reason() == "budget-exhausted", "\(try reason() ?? "nil")") }
        }
        try exhaust()

        stopDaemon(daemon)
        daemon = try start(Self.policy(mode: "block", budget: "1M"))
        for _ in 0..<10 {
            XCTAssertEqual(try reason(), "budget-exhausted", "a restart keeps it used up")
        }
        XCTAssertEqual(try bed.client(uid: Self.sender, "probe", "wwan0")["tcp"] as? String, "ECONNREFUSED", "as the kernel has it")

        for round in 0..<5 {
            XCTAssertEqual(try request(socket, "RESET-USAGE sender")["reset"] as? String, "sender")
            let p = try bed.client(uid: Self.sender, "probe", "wwan0")
            XCTAssertEqual(p["tcp"] as? String, "ok", "round \(round): a connect right after the reset's answer: \(p)")
            try exhaust()
        }

        _ = try writeConfig(Self.policy(mode: "block", budget: "3M"), in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        try waitUntil("the raised budget opens it") { (try reason() == "ok", "\(try reason() ?? "nil")") }
        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(1 << 20))
        XCTAssertTrue(up["error"] is NSNull, "1 MiB more passes on a 3 MiB budget: \(up)")
        XCTAssertEqual(up["sent"] as? Int, 1 << 20)
        _ = daemon
    }

    /// Issue 48: lowering `MeteredBudget=` from 4M to 1M after 2 MB used was answered in 1 ms, before the new quota
    /// was in the kernel, and an app that sent the moment the reply came moved another 2 MB under the old one (3 of
    /// 3 rounds). The reply comes once the quota is in force: wwan0 carries no more than what was in flight.
    func testAReloadThatLowersABudgetHoldsWhenItIsAnswered() throws {
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        try start(Self.policy(mode: "block", budget: "4M", save: 3600))
        let gates = dir + "/gates"
        try FileManager.default.createDirectory(atPath: gates, withIntermediateDirectories: false)
        chmod(gates, 0o777)
        for round in 0..<3 {
            if round > 0 {
                _ = try writeConfig(Self.policy(mode: "block", budget: "4M", save: 3600), in: dir)
                XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
                XCTAssertEqual(try request(socket, "RESET-USAGE sender")["reset"] as? String, "sender")
            }
            let first = try bed.client(uid: Self.sender, "upload", "wwan0", String(2 << 20))
            XCTAssertTrue(first["error"] is NSNull, "round \(round): 2 MiB of a 4 MiB budget: \(first)")
            // An upload already connected, its next 2 MiB sent the moment the reply comes.
            let gate = gates + "/open\(round)", out = dir + "/gated\(round).json"
            let child = try Subprocess.spawn(try bed.clientArgv(uid: Self.sender, ["gated", "wwan0", String(2 << 20), gate]),
                                             stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(out))
            addTeardownBlock { _ = child.killAndReap() }
            try waitUntil("the connection is open") { (FileManager.default.fileExists(atPath: gate + ".ready"), "") }
            _ = try writeConfig(Self.policy(mode: "block", budget: "1M", save: 3600), in: dir)
            let before = try bed.linkCounters("wwan0").txBytes
            XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
            FileManager.default.createFile(atPath: gate, contents: nil)
            XCTAssertNotNil(child.wait(timeout: 30), "the upload ends")
            let carried = try bed.linkCounters("wwan0").txBytes - before
            XCTAssertLessThan(carried, 512 << 10, "round \(round): wwan0 carried \(carried) B after the reply: "
                              + ((try? String(contentsOfFile: out, encoding: .utf8)) ?? ""))
        }
    }

    /// Issue 48: a USAGE sent 6 ms after a reload that turned counting off showed the app at 0 B (57 ms after, the
    /// right total): the reload's last reading was not waited for. It is.
    func testAUsageRightAfterCountingStopsHasTheLastCounts() throws {
        try start(Self.policy(mode: "off", save: 3600))
        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(1 << 20))
        XCTAssertTrue(up["error"] is NSNull, "\(up)")
        _ = try writeConfig(Self.policy(mode: "off", save: 3600).replacingOccurrences(of: "Count=yes", with: "Count=no"), in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        let reply = try request(socket, "USAGE")
        XCTAssertEqual(reply["counting"] as? Bool, false)
        XCTAssertGreaterThanOrEqual(try counted("sender", kind: "wwan", metered: true, from: reply).sent, 1 << 20, "\(reply)")
    }

    /// Issue 31, 7 and 11: a flow is its socket's app's, however it began. A UDP flow's addresses and ports reused by
    /// another uid while conntrack keeps it (its first uid's app took all 30 datagrams, the second's 0); a flow the
    /// peer began, the app replying (578 B counted of 3.6 MB received, past a 1 MiB budget); a connection opened
    /// before its app was in the policy (6 MB passed a 1 MiB budget, counted as other processes).
    func testAFlowIsItsSocketsAppHoweverItBegan() throws {
        try start(Self.policy(mode: "block", budget: "1M"))
        func sentOverWWAN(_ app: String) throws -> Int { try counted(app, kind: "wwan", metered: true).sent }

        // The same source port, one uid after the other.
        let before = (try sentOverWWAN("receiver"), try sentOverWWAN("sender"))
        XCTAssertEqual(try bed.client(uid: Self.receiver, "udp", "wwan0", "5", "1000", "7820")["echoed"] as? Int, 5)
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "wwan0", "25", "1000", "7820")["echoed"] as? Int, 25)
        XCTAssertEqual(try sentOverWWAN("receiver") - before.0, 5 * 1028, "the first uid's five datagrams")
        XCTAssertEqual(try sentOverWWAN("sender") - before.1, 25 * 1028, "the second uid's 25, on the same flow")

        // The peer begins: 2,000 datagrams of 1,000 bytes, each after the app's reply to the last.
        let counted0 = try counted("sender", kind: "wwan", metered: true).received
        let pushed = try bed.client(uid: Self.sender, "pushed", "wwan0", "2000", "1000")
        let got = try XCTUnwrap(pushed["received"] as? Int, "\(pushed)")
        let received = try counted("sender", kind: "wwan", metered: true).received - counted0
        print("usage: a flow the peer began: the app received \(got) bytes, counted \(received)")
        XCTAssertGreaterThanOrEqual(received, got - 1000, "all but the datagram before its first reply are the app's")
        XCTAssertLessThan(got, (1 << 20) + 2000, "the budget ends it: \(pushed)")
        try waitUntil("its budget is used up") {
            let b = try self.request(self.socket, "QUERY sender")["budget"] as? [String: Any]
            return (b?["exhausted"] as? Bool == true, "\(b ?? [:])")
        }

        // Opened by uid 4103 while no app was its; then [App late] with a budget: the connection is late's.
        let gates = dir + "/gates"
        try FileManager.default.createDirectory(atPath: gates, withIntermediateDirectories: false)
        chmod(gates, 0o777)
        let gate = gates + "/open"
        let out = dir + "/gated.json"
        let child = try Subprocess.spawn(try bed.clientArgv(uid: 4103, ["gated", "wwan0", String(4 << 20), gate]),
                                         stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(out))
        addTeardownBlock { _ = child.killAndReap() }
        try waitUntil("the connection is open") { (FileManager.default.fileExists(atPath: gate + ".ready"), "") }
        _ = try writeConfig(Self.policy(mode: "block", budget: "1M", extra: "[App late]\nUser=4103\nMeteredBudget=1M"), in: dir)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        try waitUntil("late's uid is in the counting table") {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "map", "inet",
                                        "netpermd_usage", "retag_uid"])
            return (r.stdout.contains("4103 :"), r.summary)
        }
        FileManager.default.createFile(atPath: gate, contents: nil)
        XCTAssertNotNil(child.wait(timeout: 30), "the upload ends")
        let up = try JSONValue.object(try String(contentsOfFile: out, encoding: .utf8))
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(up["error"] as? String ?? ""), "the budget ends it: \(up)")
        let late = try sentOverWWAN("late")
        print("usage: a connection older than its app: \(late) bytes counted as its app's, \(up["sent"] ?? "?") sent")
        XCTAssertGreaterThan(late, (1 << 20) - (66 << 10), "what it sent after the reload is late's")
        XCTAssertLessThan(late, (1 << 20) + (256 << 10))
    }

    /// Issue 31, 10: an app's tag never moves. `aa1122` and `zz181589` hash alike; aa1122 added beside zz (by a
    /// reload, or a restart with the new policy) took zz's tag, and with it zz's running download and counted bytes.
    func testATagNeverMovesWhateverIsAdded() throws {
        func policy(_ extra: String) -> String {
            Self.policy(mode: "block", extra: "[App zz181589]\nUser=4701\nMeteredBudget=1M\n" + extra)
        }
        func tags(_ map: String) throws -> String {
            try Subprocess.check(["nsenter", "--net=/run/netns/\(bed.ns.name)", "nft", "list", "map", "inet", "netpermd_usage",
                                  map]).stdout
        }
        var daemon = try start(policy(""))
        XCTAssertTrue(try tags("budgets").contains("0x6eadf119 : \"b_6eadf119\""))
        stopDaemon(daemon)
        let file = try String(contentsOfFile: dir + "/state/tags", encoding: .utf8)
        XCTAssertTrue(file.contains("0x6eadf119 zz181589\n"), file)

        daemon = try start(policy("[App aa1122]\nUser=4702\nMeteredBudget=1M"))
        let uids = try tags("retag_uid")
        XCTAssertTrue(uids.contains("4701 : 0x6eadf119"), "zz keeps its tag across a restart: \(uids)")
        XCTAssertTrue(uids.contains("4702 : 0x6eadf11a"), uids)
        _ = daemon
    }

    /// Issue 31, 8: a gateway with no RTC restarts at 1970-01-02 while its time service has not synchronized the
    /// clock, then NTP sets it: this period's bytes and its budget's stay (before: 1,502,507 B -> 0, and the budget
    /// reopened).
    func testADeadRTCsClockDropsNothing() throws {
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        let config = Self.policy(mode: "block", budget: "1M")
        var daemon = try start(config)
        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(4 << 20))
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(up["error"] as? String ?? ""), "\(up)")
        let before = try counted("sender", kind: "wwan", metered: true)
        let period = try request(socket, "USAGE")["period"] as? [String: Any]
        stopDaemon(daemon)

        let now = Int(Date().timeIntervalSince1970)
        try "\(86400 - now) waiting\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
        daemon = try start(config)
        var r = try request(socket, "USAGE")
        XCTAssertEqual((r["period"] as? [String: Any])?["start"] as? String, period?["start"] as? String, "never back to 1970")
        XCTAssertEqual(try counted("sender", kind: "wwan", metered: true, from: r).sent, before.sent)
        XCTAssertEqual(try request(socket, "QUERY sender")["reason"] as? String, "budget-exhausted")

        try "0 synchronized\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
        r = try request(socket, "USAGE")
        XCTAssertEqual((r["period"] as? [String: Any])?["start"] as? String, period?["start"] as? String)
        XCTAssertEqual(try counted("sender", kind: "wwan", metered: true, from: r).sent, before.sent)
        XCTAssertEqual(try request(socket, "QUERY sender")["reason"] as? String, "budget-exhausted")
        _ = daemon
    }

    /// Issue 31, 6: what parallel downloads take past a budget. Each connection is ended once its app's next packet
    /// meets the reset and its peer's next one the kernel's; what the peer had sent meanwhile still arrives, and
    /// is counted. So the bound is per connection, what its peer may have in flight: at most the receive window the
    /// app advertised. Measured with 16 downloads at once, with the app's receive buffers at their default and
    /// at 64 KiB (a window of at most the 128 KiB buffer the kernel makes of it: the bound asserted).
    func testParallelDownloadsPassTheBudgetByAtMostTheirWindows() throws {
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        try start(Self.policy(mode: "block", budget: "1M"))
        let budget = 1 << 20, flows = 16
        for (round, rcvbuf) in [(0, 65536), (1, 65536), (2, 0), (3, 0)] {
            if round > 0 {
                XCTAssertEqual(try request(socket, "RESET-USAGE sender")["reset"] as? String, "sender")
            }
            let before = try counted("sender", kind: "wwan", metered: true).received
            let args = ["parallel", "wwan0", String(flows), String(1 << 20)] + (rcvbuf > 0 ? [String(rcvbuf)] : [])
            let r = try bed.client(uid: Self.sender, args[0], args[1], args[2], args[3], rcvbuf > 0 ? args[4] : "0")
            let errors = (r["errors"] as? [Any]) ?? []
            // Reset mid-transfer, or refused at connect when they came after the budget ran out (a loaded machine
            // starts the 16 threads one after another).
            XCTAssertTrue(errors.contains { ["ECONNRESET", "EPIPE", "ECONNREFUSED"].contains($0 as? String ?? "") },
                          "the budget ended them: \(r)")
            let received = try counted("sender", kind: "wwan", metered: true).received - (round == 0 ? before : 0)
            let over = received - budget
            print("usage overshoot: \(flows) parallel downloads, receive buffer \(rcvbuf == 0 ? "default" : String(rcvbuf)): "
                  + "counted \(over) bytes past the budget (\(String(format: "%.1f", Double(over) * 100 / Double(budget)))%), "
                  + "the apps got \((r["received"] as? [Int] ?? []).reduce(0, +)) bytes of payload")
            XCTAssertLessThan(received, 4 * budget, "the budget ends them at all")
            if rcvbuf > 0 {
                // SO_RCVBUF 64 KiB: the kernel doubles it, and advertises at most the share of that it expects
                // packets to fill with data (TCP_WINDOW_CLAMP 117,248 bytes over veth on 6.18, not 64 KiB: issue 48),
                // never the whole buffer; plus a segment.
                XCTAssertLessThanOrEqual(over, flows * (2 * rcvbuf + 1500), "at most each connection's window past it")
            }
        }
    }

    func testABudgetEndsATransferAtOnceAndAResetOrTheNextPeriodOpensIt() throws {
        // The metered link is the app's only way out (its default route, Ethernet down): with its budget used up
        // its verdict is budget-exhausted, not routed-elsewhere.
        try bed.ns.ip("link", "set", "eth0", "down")
        try bed.ns.ip("route", "add", "default", "via", "10.31.0.2", "dev", "wwan0")
        try start(Self.policy(mode: "block", budget: "1M", save: 1))
        let budget = 1 << 20
        let agent = try LiveConnection(path: socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("usage apps")

        let up = try bed.client(uid: Self.sender, "upload", "wwan0", String(8 << 20))
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(up["error"] as? String ?? ""), "the sender is told: \(up)")
        XCTAssertLessThan(up["ms"] as? Int ?? .max, 2000, "at once: \(up)")
        let events = try agent.objects(until: "the app's verdict says budget-exhausted", timeout: 5) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "budget-exhausted"
        }
        let notices = events.filter { $0["event"] as? String == "usage" }
        XCTAssertEqual(notices.map { $0["percent"] as? Int }, [80, 100], "\(events)")
        let q = try request(socket, "QUERY sender")
        let b = try XCTUnwrap(q["budget"] as? [String: Any], "\(q)")
        XCTAssertEqual(b["limit"] as? Int, budget)
        XCTAssertEqual(b["enforced"] as? Bool, true)
        XCTAssertEqual(b["exhausted"] as? Bool, true)
        let used = try XCTUnwrap(b["used"] as? Int)
        let peer = try bed.peerCounter("sink_in").bytes + bed.peerCounter("sink_out").bytes
        print("usage overshoot: upload: counted \(used - budget) bytes past the budget, the peer's kernel \(peer - budget) "
              + "(payload accepted by send(): \(up["sent"] ?? "?") bytes, error \(up["error"] ?? "?") after \(up["ms"] ?? "?") ms)")
        XCTAssertLessThan(used - budget, 256 << 10, "within the next packets past the budget")
        // The kernel's quota counts the packet that crosses the budget, which is refused: with segmentation offload a
        // TCP super-packet of up to 64 KiB, so an upload ends at most that short of the budget, never more.
        XCTAssertGreaterThan(used, budget - (66 << 10), "not refused long before the budget")
        XCTAssertLessThan(peer - budget, 256 << 10)
        let refused = try bed.client(uid: Self.sender, "probe", "wwan0")
        XCTAssertEqual(refused["tcp"] as? String, "ECONNREFUSED", "\(refused)")
        XCTAssertEqual(refused["udp"] as? String, "EPERM", "\(refused)")
        // Ethernet is not metered: up, it works, and the verdict says to bind to it.
        try bed.ns.ip("link", "set", "eth0", "up")
        try bed.ns.ip("route", "add", "default", "via", "10.32.0.2", "dev", "eth0", "metric", "100")
        _ = try agent.objects(until: "the verdict is routed-elsewhere", timeout: 5) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "routed-elsewhere"
        }
        let wired = try bed.client(uid: Self.sender, "probe", "eth0")
        XCTAssertEqual(wired["tcp"] as? String, "ok", "not metered: \(wired)")
        try bed.ns.ip("link", "set", "eth0", "down")

        // A reset opens it.
        let reset = try request(socket, "RESET-USAGE sender")
        XCTAssertEqual(reset["reset"] as? String, "sender", "\(reset)")
        _ = try agent.objects(until: "the verdict is ok again", timeout: 5) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "ok"
        }
        XCTAssertEqual(try bed.client(uid: Self.sender, "probe", "wwan0")["tcp"] as? String, "ok")

        // A download: the peer is the sender, and both ends are reset.
        let down = try bed.client(uid: Self.sender, "download", "wwan0", String(8 << 20))
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(down["error"] as? String ?? ""), "the app is told: \(down)")
        try waitUntil("the source logged its connection") { (self.bed.sourceOutcomes().count == 1, "\(self.bed.sourceOutcomes())") }
        let source = bed.sourceOutcomes()[0]
        XCTAssertTrue(["ECONNRESET", "EPIPE"].contains(source["error"] as? String ?? ""), "the sender (the peer) is told: \(source)")
        XCTAssertLessThan(source["ms"] as? Int ?? .max, 2000, "at once: \(source)")
        _ = try agent.objects(until: "budget-exhausted again", timeout: 5) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "budget-exhausted"
        }
        // From a reading made now (USAGE), not the one the quota's notice asked for: the resets that ended the
        // connection may be counted after it (40 bytes).
        let settled = try counted("sender", kind: "wwan", metered: true)
        let downUsed = settled.sent + settled.received
        print("usage overshoot: download: counted \(downUsed - budget) bytes past the budget (the app received "
              + "\(down["received"] ?? "?") bytes of payload, the peer sent \(source["sent"] ?? "?"))")
        XCTAssertLessThan(downUsed - budget, 512 << 10)

        // The next period, a month on.
        try "\(32 * 86400) synchronized\n".write(toFile: clockFile, atomically: true, encoding: .utf8)
        _ = try agent.objects(until: "the new period opens the budget", timeout: 10) {
            $0["event"] as? String == "app" && $0["app"] as? String == "sender" && $0["reason"] as? String == "ok"
        }
        let r = try request(socket, "USAGE sender")
        let previous = try counted("sender", kind: "wwan", metered: true, period: "previous", from: r)
        XCTAssertEqual(previous.sent + previous.received, downUsed, "this period's totals became the previous one's")
        XCTAssertEqual(try counted("sender", kind: "wwan", metered: true, from: r).received, 0)
        XCTAssertNotEqual((r["period"] as? [String: Any])?["start"] as? String,
                          (b["period_start"] as? String), "a new period")
        XCTAssertEqual(try bed.client(uid: Self.sender, "probe", "wwan0")["tcp"] as? String, "ok")
    }
}
