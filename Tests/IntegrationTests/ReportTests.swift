// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The privacy report against the real kernel (docs/PRIVACY.md): apps in a test namespace resolve names with the
/// test's own DNS server and connect to a peer over wifi and wwan; the report must list exactly what the DNS server's
/// log and the peer's accept log say happened (not the daemon's word), names only where the app itself resolved
/// them, refusals with their reason; user B never reads A's destinations; off deletes the file on disk.
final class ReportTests: IntegrationTestCase {
    static let resolver: UInt32 = 4201, refused: UInt32 = 4202, byAddress: UInt32 = 4203
    static let denied: UInt32 = 4204, spender: UInt32 = 4205

    static func policy(enabled: Bool = true) -> String {
        """
        [Usage]
        Count=yes

        [Report]
        Enabled=\(enabled ? "yes" : "no")

        [Enforcement]
        Mode=block

        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        [Defaults]
        WiFi=allow
        WWAN=allow

        [App resolver]
        User=\(resolver)

        [App refused]
        User=\(refused)
        WWAN=ask

        [App byaddress]
        User=\(byAddress)

        [App denied]
        User=\(denied)
        WWAN=deny

        [App spender]
        User=\(spender)
        MeteredBudget=1
        """
    }

    private var bed: ReportBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    private var reportFile: String { dir + "/state/report" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        dir = try makeTempDir()
        chmod(dir, 0o755)   // the socket is reached by unprivileged users too
        bed = try ReportBed(self, dir: dir)
        showOnFailure("dns log") { (try? String(contentsOfFile: self.bed.dnsLog, encoding: .utf8)) ?? "(none)" }
        showOnFailure("accept log") { (try? String(contentsOfFile: self.bed.acceptLog, encoding: .utf8)) ?? "(none)" }
        showOnFailure("REPORT") { (try? Subprocess.run([self.netpermctl, "--socket", self.socket, "report"]).stdout) ?? "?" }
    }

    @discardableResult
    private func start() throws -> DaemonProcess {
        let path = try writeConfig(Self.policy(), in: dir)
        let d = try startDaemon(in: bed.ns, socket: socket, config: path, nsenter: true)
        try waitUntil("counting is in force", timeout: 10) {
            let u = try self.request(self.socket, "STATUS")["usage"] as? [String: Any]
            return (u?["state"] as? String == "counting", "\(u ?? [:])")
        }
        return d
    }

    /// `netpermctl --json ARGS` as `uid`.
    private func ctl(as uid: UInt32, _ args: [String]) throws -> CommandResult {
        try Subprocess.run(["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", netpermctl, "--socket",
                            socket, "--json"] + args)
    }

    /// REPORT's destinations as "app host kind connections refused-ask", asked by `uid` (nil: root).
    private func rows(as uid: UInt32? = nil) throws -> [String: [String: Any]] {
        let r: [String: Any]
        if let uid {
            let out = try ctl(as: uid, ["report"])
            r = try JSONValue.object(out.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        } else {
            r = try request(socket, "REPORT")
        }
        var out: [String: [String: Any]] = [:]
        for a in r["apps"] as? [[String: Any]] ?? [] {
            for d in a["destinations"] as? [[String: Any]] ?? [] {
                out["\(a["app"] as? String ?? "?") \(d["host"] as? String ?? "?") \(d["kind"] as? String ?? "?")"] = d
            }
        }
        return out
    }

    func testTheReportListsExactlyWhatTheAppsDid() throws {
        try start()
        for uid in [Self.resolver, Self.refused, Self.byAddress] {
            let on = try ctl(as: uid, ["report", "on"])
            XCTAssertEqual(on.status, 0, on.summary)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: reportFile), "turning it on is written at once")

        let names = ReportBed.names.keys.sorted()
        let resolved = try bed.app(uid: Self.resolver, ["resolve"] + names)
        XCTAssertEqual(resolved["errors"] as? [String: String], [:], "\(resolved)")
        let refusedRun = try bed.app(uid: Self.refused, "connect", "10.42.0.2")
        XCTAssertNotNil((refusedRun["errors"] as? [String: String])?["10.42.0.2"], "refused on wwan: \(refusedRun)")
        let direct = try bed.app(uid: Self.byAddress, "connect", "10.41.0.3")
        XCTAssertEqual(direct["errors"] as? [String: String], [:], "\(direct)")

        // The peer's word: three queries of the three names, four connections accepted (three by name, one by address).
        XCTAssertEqual(bed.dnsQueries().sorted(), names)
        XCTAssertEqual(bed.accepted().sorted(), ["10.41.0.3", "10.41.0.3", "10.42.0.2", "10.42.0.3"])

        var expected: [String: (connections: Int, ask: Int, named: Bool, address: String)] = [
            "resolver 10.41.0.2 wifi": (3, 0, false, ReportBed.dns),     // the three DNS queries themselves
            "refused 10.42.0.2 wwan": (0, 1, false, "10.42.0.2"),
            "byaddress 10.41.0.3 wifi": (1, 0, false, "10.41.0.3"),
        ]
        for (name, address) in ReportBed.names {
            expected["resolver \(name) \(address.hasPrefix("10.41.") ? "wifi" : "wwan")"] = (1, 0, true, address)
        }
        var last: [String: [String: Any]] = [:]
        try waitUntil("the report lists what the apps did", timeout: 10) {
            last = try rows()
            let ok = Set(last.keys) == Set(expected.keys) && expected.allSatisfy { key, e in
                let d = last[key]
                return d?["connections"] as? Int == e.connections
                    && (d?["refused"] as? [String: Any])?["ask"] as? Int ?? 0 >= e.ask && d?["named"] as? Bool == e.named
            }
            return (ok, "\(last)")
        }
        for (key, e) in expected {
            XCTAssertEqual(last[key]?["address"] as? String, e.address, key)
            XCTAssertEqual(last[key]?["metered"] as? Bool, key.hasSuffix("wwan"), key)
        }
        XCTAssertEqual(last["refused 10.42.0.2 wwan"]?["connections"] as? Int, 0, "never reached the peer")

        // User B (the refused app's) reads only their own app, and nothing of A's through any verb or file.
        XCTAssertEqual(Set(try rows(as: Self.refused).keys), ["refused 10.42.0.2 wwan"])
        for args in [["report", "resolver"], ["report", "clear", "resolver"], ["metrics"]] {
            let r = try ctl(as: Self.refused, args)
            XCTAssertNotEqual(r.status, 0, "\(args): \(r.summary)")
            XCTAssertFalse(r.stdout.contains("report.test") || r.stdout.contains("10.41.0.3"), r.summary)
        }
        var st = stat()
        XCTAssertEqual(stat(reportFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "the file is root's alone")
        XCTAssertEqual(st.st_uid, 0)
        let read = try Subprocess.run(["setpriv", "--reuid", "\(Self.refused)", "--regid", "\(Self.refused)",
                                       "--clear-groups", "cat", reportFile])
        XCTAssertNotEqual(read.status, 0, "B cannot read the file: \(read.summary)")
    }

    /// What each app was refused, with the reason, judged against what the apps sent and the peer's logs (it received
    /// none of it): an app denied wwan (one connection by the name it resolved, two by address), an app waiting for
    /// an answer (`ask`, no agent), an app over its budget of one byte. Exactly those counts, no connection made.
    func testRefusalsAreListedWithTheirReason() throws {
        try start()
        for uid in [Self.refused, Self.denied, Self.spender] {
            let on = try ctl(as: uid, ["report", "on"])
            XCTAssertEqual(on.status, 0, on.summary)
        }
        let before = Int(Date().timeIntervalSince1970)
        let byName = try bed.app(uid: Self.denied, "resolve", "tiles.report.test")
        XCTAssertEqual(byName["addresses"] as? [String: String], ["tiles.report.test": "10.42.0.2"], "\(byName)")
        XCTAssertEqual((byName["errors"] as? [String: String])?["10.42.0.2"], "ECONNREFUSED", "\(byName)")
        let byAddress = try bed.app(uid: Self.denied, "connect", "10.42.0.3", "10.42.0.3")
        XCTAssertEqual((byAddress["errors"] as? [String: String])?["10.42.0.3"], "ECONNREFUSED", "\(byAddress)")
        let asking = try bed.app(uid: Self.refused, "connect", "10.42.0.2")
        XCTAssertNotNil((asking["errors"] as? [String: String])?["10.42.0.2"], "\(asking)")
        let spent = try bed.app(uid: Self.spender, "connect", "10.42.0.3", "10.42.0.3")
        XCTAssertEqual((spent["errors"] as? [String: String])?["10.42.0.3"], "ECONNREFUSED", "\(spent)")
        // The peer's word: the one query answered, nothing accepted.
        XCTAssertEqual(bed.dnsQueries(), ["tiles.report.test"])
        XCTAssertEqual(bed.accepted(), [])
        let after = Int(Date().timeIntervalSince1970)

        // key: connections, denied, ask, budget
        let expected: [String: [Int]] = [
            "denied 10.41.0.2 wifi": [1, 0, 0, 0],               // its DNS query
            "denied tiles.report.test wwan": [0, 1, 0, 0],
            "denied 10.42.0.3 wwan": [0, 2, 0, 0],
            "refused 10.42.0.2 wwan": [0, 0, 1, 0],
            "spender 10.42.0.3 wwan": [0, 0, 0, 2],
        ]
        func counts(_ d: [String: Any]?) -> [Int] {
            let r = d?["refused"] as? [String: Any]
            return [d?["connections"] as? Int ?? -1] + ["denied", "ask", "budget"].map { r?[$0] as? Int ?? -1 }
        }
        var last: [String: [String: Any]] = [:]
        try waitUntil("the report lists each refusal with its reason", timeout: 10) {
            last = try rows()
            return (last.mapValues(counts) == expected, "\(last.mapValues(counts))")
        }
        XCTAssertEqual(last["denied tiles.report.test wwan"]?["address"] as? String, "10.42.0.2")
        XCTAssertEqual(last["denied tiles.report.test wwan"]?["named"] as? Bool, true)
        for (key, d) in last {
            let first = d["first"] as? Int ?? 0, lastTime = d["last"] as? Int ?? 0
            XCTAssertTrue(before <= first && first <= lastTime && lastTime <= after, "\(key): \(d)")
        }
        // netpermctl marks them.
        let table = try Subprocess.run([netpermctl, "--socket", socket, "report"])
        XCTAssertTrue(table.stdout.contains("2 denied") && table.stdout.contains("1 waiting")
                      && table.stdout.contains("2 over budget"), table.stdout)
    }

    /// Events: B's subscription hears nothing of A's destinations while A resolves and connects.
    func testEventsTellNoDestination() throws {
        try start()
        XCTAssertEqual(try ctl(as: Self.resolver, ["report", "on"]).status, 0)
        let events = dir + "/events-b.txt"
        let sub = try Subprocess.spawn(["setpriv", "--reuid", "\(Self.refused)", "--regid", "\(Self.refused)",
                                        "--clear-groups", netpermctl, "--socket", socket, "--json", "monitor"],
                                       stdin: .devNull, stdout: .appendFile(events), stderr: .appendFile(events))
        addTeardownBlock { sub.killAndReap() }
        try waitUntil("B's monitor has its snapshot") {
            let t = (try? String(contentsOfFile: events, encoding: .utf8)) ?? ""
            return (!t.isEmpty, t)
        }
        _ = try bed.app(uid: Self.resolver, ["resolve"] + ReportBed.names.keys.sorted())
        try waitUntil("A's connections are in the report", timeout: 10) {
            let r = try self.rows()
            return (r.keys.contains { $0.hasPrefix("resolver maps.report.test") }, "\(r)")
        }
        sub.signal(SIGINT)
        _ = sub.killAndReap()
        let seen = (try? String(contentsOfFile: events, encoding: .utf8)) ?? ""
        for secret in ["report.test", "10.41.0.3", "10.42.0.3"] { XCTAssertFalse(seen.contains(secret), secret) }
    }

    /// Turning the report off deletes the file (checked on disk), and a person's own off their entries.
    func testOffDeletesTheFile() throws {
        try start()
        XCTAssertEqual(try ctl(as: Self.byAddress, ["report", "on"]).status, 0)
        _ = try bed.app(uid: Self.byAddress, "connect", "10.41.0.3")
        try waitUntil("recorded", timeout: 10) { let r = try self.rows(); return (!r.isEmpty, "\(r)") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: reportFile))
        // The person's own off: their entries go from the file at once.
        XCTAssertEqual(try ctl(as: Self.byAddress, ["report", "off"]).status, 0)
        try waitUntil("their entries are gone from the file") {
            let t = (try? String(contentsOfFile: self.reportFile, encoding: .utf8)) ?? ""
            return (!t.contains("byaddress"), t)
        }
        XCTAssertTrue(try rows().isEmpty)
        // The admin's off: the file goes.
        try Self.policy(enabled: false).write(toFile: dir + "/netpermd.conf", atomically: true, encoding: .utf8)
        XCTAssertEqual(try request(socket, "RELOAD")["ok"] as? Bool, true)
        try waitUntil("the file is deleted") {
            (!FileManager.default.fileExists(atPath: self.reportFile), "still there")
        }
    }

    /// A restart (SIGTERM, then the same state directory) keeps the report as it was: entries, counts and times. An
    /// upgrade too: a file the first format's daemon wrote (version 1, as it wrote it) is read by this one.
    func testTheReportSurvivesARestartAndAnUpgrade() throws {
        let day = Int(Date().timeIntervalSince1970) / 86400, t = day * 86400 + 60
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
        try """
            # netpermd's privacy report, written by the daemon (docs/PRIVACY.md).
            version 1
            person \(Self.byAddress)
            entry \(day) byaddress \(Self.byAddress) wwan m old.report.test 10.42.0.9 443 6 \(t) \(t + 5) 3 4096 0 1 0

            """.write(toFile: reportFile, atomically: true, encoding: .utf8)
        let first = try start()
        let old = try rows()["byaddress old.report.test wwan"]
        XCTAssertEqual([old?["connections"], old?["bytes"], old?["first"], old?["last"], old?["port"]].map { $0 as? Int },
                       [3, 4096, t, t + 5, 443], "the version 1 file's entry: \(String(describing: old))")
        XCTAssertEqual((old?["refused"] as? [String: Any])?["ask"] as? Int, 1)
        XCTAssertEqual(old?["address"] as? String, "10.42.0.9")

        // Its person's choice came with it: a new connection is recorded without asking again. (The namespace's
        // conntrack counts no bytes, `nf_conntrack_acct` 0: nothing of it can come after the restart.)
        _ = try bed.app(uid: Self.byAddress, "connect", "10.41.0.3")
        try waitUntil("the connection is recorded", timeout: 10) {
            let d = try self.rows()["byaddress 10.41.0.3 wifi"]
            return ((d?["connections"] as? Int) == 1, "\(String(describing: d))")
        }
        let before = try request(socket, "REPORT")["apps"] as? [[String: Any]] ?? []
        stopDaemon(first)
        let text = (try? String(contentsOfFile: reportFile, encoding: .utf8)) ?? ""
        XCTAssertTrue(text.contains("10.41.0.3") && text.contains("old.report.test"), "written at the stop: \(text)")

        try start()
        let after = try request(socket, "REPORT")["apps"] as? [[String: Any]] ?? []
        XCTAssertEqual(before.count, 1)
        XCTAssertEqual(NSArray(array: after), NSArray(array: before), "the same report after the restart")
    }

    /// An app that asks a resolver on the machine's loopback (systemd-resolved's 127.0.0.53, dnsmasq's 127.0.0.1)
    /// sends its own query over lo: the resolver's answer to it names what the app connects to next.
    func testNamesResolvedByAResolverOnLoopback() throws {
        try bed.startLoopbackResolver(self, dir: dir)
        try start()
        XCTAssertEqual(try ctl(as: Self.resolver, ["report", "on"]).status, 0)
        let r = try bed.app(uid: Self.resolver, dns: ReportBed.loopbackResolver, ["resolve", "maps.report.test"])
        XCTAssertEqual(r["addresses"] as? [String: String], ["maps.report.test": "10.41.0.3"], "\(r)")
        XCTAssertEqual(bed.dnsQueries(), ["maps.report.test"], "the loopback resolver asked the test's server")
        // The answer and the connection come on two sockets, read in either order: the connection may be shown by
        // its address for a moment, until the answer read after it names it (ReportUnnamed).
        var last: [String: [String: Any]] = [:]
        try waitUntil("the connection is recorded by its name", timeout: 10) {
            last = try self.rows()
            return (last["resolver maps.report.test wifi"] != nil, "\(last)")
        }
        XCTAssertEqual(last["resolver maps.report.test wifi"]?["address"] as? String, "10.41.0.3", "\(last)")
        XCTAssertEqual(last["resolver maps.report.test wifi"]?["named"] as? Bool, true)
        XCTAssertEqual(Set(last.keys), ["resolver maps.report.test wifi"], "nothing of lo itself: \(last)")
    }

    /// A burst of answers (a page's names at once) while the daemon's loop is away (stopped here: a busy machine,
    /// a long pass) is heard whole once it is back: the name the report shows for their one address is the last
    /// answer's, which a reader whose socket's buffer had overflowed would have lost.
    func testABurstOfAnswersIsHeardWhole() throws {
        let d = try start()
        XCTAssertEqual(try ctl(as: Self.resolver, ["report", "on"]).status, 0)
        let count = 1000
        d.signal(SIGSTOP)
        let r: [String: Any]
        do {
            defer { d.signal(SIGCONT) }
            r = try bed.burst(uid: Self.resolver, count: count)
        }
        XCTAssertEqual(r["answered"] as? Int, count, "\(r)")
        // Once the loop has answered, it has read what was queued before (its sources in the order they woke).
        XCTAssertEqual(try request(socket, "PING")["ok"] as? Bool, true)
        _ = try bed.app(uid: Self.resolver, "connect", "10.41.0.3")
        var last: [String: [String: Any]] = [:]
        try waitUntil("the connection is recorded", timeout: 10) {
            last = try self.rows()
            return (last.keys.contains { $0.hasSuffix(" wifi") && !$0.hasPrefix("resolver 10.41.0.2") }, "\(last.keys)")
        }
        let host = "n\(count - 1).\(ReportBed.burstDomain)"
        XCTAssertNotNil(last["resolver \(host) wifi"], "named by the last answer: \(last.keys.sorted())")
        let metrics = try request(socket, "METRICS")["metrics"] as? String ?? ""
        XCTAssertTrue(metrics.contains("netpermd_report_events_lost_total 0"), metrics)
    }
}
