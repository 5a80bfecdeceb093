// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 3: the per-app policy and the verdict, against the real daemon on veth links named like a phone's.
final class PolicyVerdictTests: IntegrationTestCase {
    /// A phone: only the messenger may use WWAN.
    static let phonePolicy = """
        [Defaults]
        WiFi=allow
        WWAN=deny
        Ethernet=allow
        Other=allow

        [App updater]
        Executable=/nonexistent/updater
        WWAN=deny

        [App messenger]
        Executable=/nonexistent/messenger
        WWAN=allow

        """

    private func assertVerdict(_ v: VerdictView, available: Bool, reason: String, via: String?, denied: [String],
                               _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(v.matches(available: available, reason: reason, via: via, denied: denied, pending: []),
                      "\(what): expected available \(available), reason \(reason), via \(via ?? "null"), denied "
                        + "\(denied); got \(v)", file: file, line: line)
    }

    /// `netpermctl query APP` says the same in words, and `--json` prints the daemon's reply line as it is.
    private func assertCtlQuery(_ f: AppFixture, _ app: String, says network: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let human = try ctl(["--socket", f.socket, "query", app])
        XCTAssertEqual(human.status, 0, human.summary, file: file, line: line)
        XCTAssertTrue(human.lines.contains("app:          \(app) (matched by name)"), human.summary, file: file, line: line)
        XCTAssertTrue(human.lines.contains("network:      \(network)"), "expected 'network:      \(network)' in:\n"
            + human.stdout, file: file, line: line)
        let direct = try socat(f.socket, ["QUERY \(app)"])
        let json = try ctl(["--socket", f.socket, "--json", "query", app])
        XCTAssertEqual(json.status, 0, json.summary, file: file, line: line)
        XCTAssertEqual(json.lines, direct, "netpermctl --json query \(app) prints the daemon's reply", file: file, line: line)
    }

    func testVerdictFlipsAsLinksComeAndGo() throws {
        let f = try makeAppFixture(policy: Self.phonePolicy)

        // Links up, but no default route anywhere.
        for app in ["updater", "messenger"] {
            let (v, o) = try queryVerdict(f.socket, app)
            assertVerdict(v, available: false, reason: "no-network", via: nil, denied: [], "\(app) with no route")
            XCTAssertEqual(o["matched_by"] as? String, "name", "\(o)")
            XCTAssertNil(o["identity"], "no identity when naming another app: \(o)")
        }
        let (u0, _) = try queryVerdict(f.socket, "updater")
        XCTAssertEqual(u0.permissions, ["wifi": "allow", "wwan": "deny", "ethernet": "allow", "other": "allow", "metered": "allow", "roaming": "allow"])
        let (m0, _) = try queryVerdict(f.socket, "messenger")
        XCTAssertEqual(m0.permissions, ["wifi": "allow", "wwan": "allow", "ethernet": "allow", "other": "allow", "metered": "allow", "roaming": "allow"])
        try assertCtlQuery(f, "updater", says: "no: no usable network")

        // Wi-Fi and WWAN up: Wi-Fi has the lower metric, so both apps go through wlan0. The updater is still
        // told that a usable link (wwan) is denied to it.
        try f.addAddress("wlan0")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wlan0", metric: 100)
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForLinks(f.socket, "wlan0 and wwan0 usable") { $0[name: "wlan0"]?.usable == true && $0[name: "wwan0"]?.usable == true }
        assertVerdict(try queryVerdict(f.socket, "updater").0, available: true, reason: "ok", via: "wlan0/wifi/false",
                      denied: ["wwan"], "updater on wifi + wwan")
        assertVerdict(try queryVerdict(f.socket, "messenger").0, available: true, reason: "ok", via: "wlan0/wifi/false",
                      denied: [], "messenger on wifi + wwan")
        try assertCtlQuery(f, "updater", says: "yes, via wlan0 (wifi)")
        try assertCtlQuery(f, "messenger", says: "yes, via wlan0 (wifi)")

        // Wi-Fi's peer goes down: wlan0 loses carrier but keeps its route, which the kernel still chooses: traffic
        // goes nowhere. The updater may only use WWAN, which it may not; the messenger could bind to wwan0.
        try f.setPeer(of: "wlan0", up: false)
        try waitForVerdict(f.socket, "updater", "denied once wlan0 has no carrier") { $0.reason != "ok" }
        assertVerdict(try queryVerdict(f.socket, "updater").0, available: false, reason: "denied", via: nil,
                      denied: ["wwan"], "updater on wwan only (peer down)")
        let (m1, mo) = try queryVerdict(f.socket, "messenger")
        assertVerdict(m1, available: false, reason: "routed-elsewhere", via: nil, denied: [], "messenger (peer down)")
        XCTAssertEqual(m1.bindTo, "wwan0", "\(mo)")
        try assertCtlQuery(f, "updater", says: "no: denied on wwan")
        try assertCtlQuery(f, "messenger", says: "no: its traffic would leave by wlan0 (wifi), which is not usable; it could bind to wwan0 (wwan, metered)")

        // Back, then Wi-Fi's default route goes instead.
        try f.setPeer(of: "wlan0", up: true)
        try waitForVerdict(f.socket, "updater", "ok via wlan0 again") { $0.via == "wlan0/wifi/false" }
        try f.deleteDefaultRoute("wlan0", metric: 100)
        try waitForVerdict(f.socket, "updater", "denied once wlan0's route is gone") { $0.reason != "ok" }
        assertVerdict(try queryVerdict(f.socket, "updater").0, available: false, reason: "denied", via: nil,
                      denied: ["wwan"], "updater on wwan only (route removed)")
        assertVerdict(try queryVerdict(f.socket, "messenger").0, available: true, reason: "ok", via: "wwan0/wwan/true",
                      denied: [], "messenger on wwan only (route removed)")

        // APPS: every app, in definition order, named.
        let apps = try request(f.socket, "APPS")
        let list = try XCTUnwrap(apps["apps"] as? [[String: Any]], "\(apps)")
        XCTAssertEqual(list.compactMap { $0["app"] as? String }, ["updater", "messenger"])
        XCTAssertEqual(list.compactMap { $0["matched_by"] as? String }, ["name", "name"])
        XCTAssertEqual(list.compactMap { VerdictView($0)?.reason }, ["denied", "ok"])

        // Everything down.
        try f.deleteDefaultRoute("wwan0", metric: 200)
        try waitForVerdict(f.socket, "messenger", "no network at all") { $0.reason == "no-network" }
        assertVerdict(try queryVerdict(f.socket, "updater").0, available: false, reason: "no-network", via: nil,
                      denied: [], "updater with nothing usable")
        assertVerdict(try queryVerdict(f.socket, "messenger").0, available: false, reason: "no-network", via: nil,
                      denied: [], "messenger with nothing usable")
        try assertCtlQuery(f, "messenger", says: "no: no usable network")

        // A name the policy does not have.
        let missing = try request(f.socket, "QUERY nosuchapp")
        XCTAssertEqual(missing["error"] as? String, "not-found", "\(missing)")
        let ctlMissing = try ctl(["--socket", f.socket, "query", "nosuchapp"])
        XCTAssertEqual(ctlMissing.status, 1, ctlMissing.summary)
        XCTAssertTrue(ctlMissing.stderr.contains("not-found"), ctlMissing.summary)
    }

    /// Identity as the kernel reports it: a copied socat run as nobody is `myapp` by its executable, and may
    /// ask only about itself.
    func testPeerIdentityByExecutableUnderAnotherUid() throws {
        let bins = try makeTempDir()
        guard chmod(bins, 0o755) == 0 else { throw HarnessError("chmod \(bins) failed") }
        let mysocat = try copyExecutable("/usr/bin/socat", to: bins, as: "mysocat-\(getpid())")
        let f = try makeAppFixture(policy: """
            [App myapp]
            Executable=\(mysocat)
            WiFi=deny
            WWAN=allow
            Ethernet=deny
            Other=ask

            [App byuser]
            User=65534
            WiFi=allow
            WWAN=ask
            Ethernet=deny
            Other=deny

            [App otherapp]
            Executable=/nonexistent/otherapp

            """)
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForLinks(f.socket, "wwan0 usable") { $0[name: "wwan0"]?.usable == true }

        let r = try Subprocess.run(Self.asNobody + [mysocat, "-", "UNIX-CONNECT:\(f.socket)"],
                                   input: Array("QUERY\nQUERY otherapp\nMETRICS\nQUERY myapp\nRELOAD\nWAIT otherapp 1\n".utf8))
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, 6, "one reply per request: \(r.summary)")
        guard r.lines.count == 6 else { return }
        let own = try JSONValue.object(r.lines[0])
        XCTAssertEqual(try JSONValue.bool(own, "ok"), true, "\(own)")
        XCTAssertEqual(own["app"] as? String, "myapp", "\(own)")
        XCTAssertEqual(own["matched_by"] as? String, "executable", "Executable= wins over User=: \(own)")
        let v = try XCTUnwrap(VerdictView(own), "\(own)")
        XCTAssertTrue(v.matches(available: true, reason: "ok", via: "wwan0/wwan/true", denied: [], pending: []), "\(v)")
        // Other=ask, undecided, with no agent to ask: deny.
        XCTAssertEqual(v.permissions, ["wifi": "deny", "wwan": "allow", "ethernet": "deny", "other": "deny", "metered": "allow", "roaming": "allow"])
        let identity = try XCTUnwrap(own["identity"] as? [String: Any], "\(own)")
        XCTAssertEqual(try JSONValue.int(identity, "uid"), 65534, "\(identity)")
        XCTAssertEqual(try JSONValue.optionalString(identity, "executable"), mysocat, "\(identity)")
        XCTAssertGreaterThan(try JSONValue.int(identity, "pid"), 1, "\(identity)")
        XCTAssertNil(identity["problem"], "root's daemon reads /proc/PID/exe of any uid: \(identity)")

        for (i, request) in [(1, "QUERY otherapp"), (2, "METRICS"), (4, "RELOAD"), (5, "WAIT otherapp 1")] {
            let o = try JSONValue.object(r.lines[i])
            XCTAssertEqual(try JSONValue.bool(o, "ok"), false, "\(request) as nobody: \(o)")
            XCTAssertEqual(o["error"] as? String, "permission-denied", "\(request) as nobody: \(o)")
        }
        let named = try JSONValue.object(r.lines[3])
        XCTAssertEqual(named["app"] as? String, "myapp", "naming one's own app is allowed: \(named)")
        XCTAssertEqual(named["matched_by"] as? String, "executable", "\(named)")
        XCTAssertEqual((named["identity"] as? [String: Any])?["uid"] as? Int, 65534, "\(named)")

        // The same executable run by root is still myapp: the match is by executable, not by uid.
        let asRoot = try socatRun(f.socket, input: Array("QUERY\n".utf8))
        XCTAssertEqual(asRoot.lines.count, 1, asRoot.summary)
        let root = try JSONValue.object(asRoot.lines.first ?? "")
        XCTAssertEqual(root["app"] as? String, "socat", "root's /usr/bin/socat matches no [App]: \(root)")
        XCTAssertEqual(root["matched_by"] as? String, "default", "\(root)")
        let rootMy = try Subprocess.run([mysocat, "-", "UNIX-CONNECT:\(f.socket)"], input: Array("QUERY\n".utf8))
        let rootMyReply = try JSONValue.object(rootMy.lines.first ?? "")
        XCTAssertEqual(rootMyReply["app"] as? String, "myapp", "\(rootMy.summary)")
        XCTAssertEqual((rootMyReply["identity"] as? [String: Any])?["uid"] as? Int, 0, "\(rootMy.summary)")
    }

    /// User= matches a process of that uid whose executable no Executable= names.
    func testUserMatchesAProcessOfThatUid() throws {
        let f = try makeAppFixture(policy: """
            [App byuser]
            User=65534
            WiFi=allow
            WWAN=ask
            Ethernet=deny
            Other=deny

            [App otherapp]
            Executable=/nonexistent/otherapp

            """)
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForLinks(f.socket, "wwan0 usable") { $0[name: "wwan0"]?.usable == true }

        let r = try Subprocess.run(Self.asNobody + ["/usr/bin/socat", "-", "UNIX-CONNECT:\(f.socket)"],
                                   input: Array("QUERY\nQUERY otherapp\n".utf8))
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, 2, r.summary)
        guard r.lines.count == 2 else { return }
        let own = try JSONValue.object(r.lines[0])
        XCTAssertEqual(own["app"] as? String, "byuser", "\(own)")
        XCTAssertEqual(own["matched_by"] as? String, "user", "\(own)")
        let v = try XCTUnwrap(VerdictView(own), "\(own)")
        // WWAN=ask, undecided, with no agent to ask: denied, and the sources say why.
        XCTAssertTrue(v.matches(available: false, reason: "denied", via: nil, denied: ["wwan"], pending: []), "\(v)")
        XCTAssertEqual(v.permissions, ["wifi": "allow", "wwan": "deny", "ethernet": "deny", "other": "deny", "metered": "allow", "roaming": "allow"])
        XCTAssertEqual((own["sources"] as? [String: Any])?["wwan"] as? String, "no-agent", "\(own)")
        let identity = try XCTUnwrap(own["identity"] as? [String: Any], "\(own)")
        XCTAssertEqual(try JSONValue.int(identity, "uid"), 65534, "\(identity)")
        XCTAssertEqual(try JSONValue.optionalString(identity, "executable"), "/usr/bin/socat", "\(identity)")
        XCTAssertEqual(try JSONValue.object(r.lines[1])["error"] as? String, "permission-denied", r.lines[1])

        // Root's socat is not uid 65534: it falls to [Defaults] under the executable's name.
        let root = try request(f.socket, "QUERY")
        XCTAssertEqual(root["app"] as? String, "socat", "\(root)")
        XCTAssertEqual(root["matched_by"] as? String, "default", "\(root)")
        XCTAssertEqual((root["identity"] as? [String: Any])?["uid"] as? Int, 0, "\(root)")
    }

    /// A member of AdminGroup= (nobody, whose gid is nogroup's) is privileged like root. The group is looked up
    /// when a non-root peer connects, and again under each policy generation.
    func testAdminGroupMemberIsPrivileged() throws {
        let policy = "[App otherapp]\nExecutable=/nonexistent/otherapp\n"
        let f = try makeAppFixture(policy: "[Defaults]\nAdminGroup=nogroup\n\n" + policy)
        let asNobody = Self.asNobody + ["/usr/bin/socat", "-", "UNIX-CONNECT:\(f.socket)"]
        let member = try Subprocess.run(asNobody, input: Array("QUERY otherapp\nAPPS\n".utf8))
        XCTAssertEqual(member.lines.count, 2, member.summary)
        guard member.lines.count == 2 else { return }
        let other = try JSONValue.object(member.lines[0])
        XCTAssertEqual(other["app"] as? String, "otherapp", "a member may name another app: \(other)")
        XCTAssertEqual(try JSONValue.bool(try JSONValue.object(member.lines[1]), "ok"), true, member.lines[1])

        // The same peer once AdminGroup= names a group that does not exist.
        try (IntegrationTestCase.standardConfig + "\n[Defaults]\nAdminGroup=netperm-nosuch\n\n" + policy)
            .write(toFile: f.config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try JSONValue.bool(try request(f.socket, "RELOAD"), "ok"), true)
        let outsider = try Subprocess.run(asNobody, input: Array("QUERY otherapp\n".utf8))
        let denied = try JSONValue.object(outsider.lines.first ?? "")
        XCTAssertEqual(denied["error"] as? String, "permission-denied", "\(denied)")
        XCTAssertTrue(f.daemon.log.contains("group 'netperm-nosuch' does not exist"), f.daemon.logTail)
    }

    /// The 1-based line of the first line of `text` that starts with `prefix`.
    private func lineNumber(of prefix: String, in text: String) throws -> Int {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let i = lines.firstIndex(where: { $0.hasPrefix(prefix) }) else { throw HarnessError("no '\(prefix)' in the text") }
        return i + 1
    }

    private static func updaterPolicy(wwan: String, extra: String = "") -> String {
        IntegrationTestCase.standardConfig + "\n[App updater]\nExecutable=/nonexistent/updater\n\(extra)WWAN=\(wwan)\n"
    }

    /// A broken edit keeps the old policy (SIGHUP or not); a good one is picked up by inotify; RELOAD and
    /// drop-ins work; every error names the file and the line.
    func testReloadKeepsTheLastGoodPolicy() throws {
        let f = try makeAppFixture(policy: "[App updater]\nExecutable=/nonexistent/updater\nWWAN=deny\n")
        try f.addAddress("wwan0")
        try f.addDefaultRoute("wwan0", metric: 200)
        try waitForVerdict(f.socket, "updater", "denied on wwan") { $0.reason == "denied" && $0.denied == ["wwan"] }
        var p = try policyStatus(f.socket)
        XCTAssertEqual(p.generation, 1)
        XCTAssertEqual(p.apps, 1)
        XCTAssertNil(p.error)

        // A broken edit (a relative Executable=): inotify notices it, the reload fails, generation 1 stays in force.
        let broken = Self.updaterPolicy(wwan: "allow", extra: "Executable=bin/bogus\n")
        let badLine = try lineNumber(of: "Executable=bin/bogus", in: broken)
        _ = try writeConfig(broken, in: f.dir)
        try waitUntil("STATUS reports the failed reload", timeout: 5) {
            p = try policyStatus(f.socket)
            return (p.error != nil, "\(p)")
        }
        XCTAssertEqual(p.generation, 1, "a failed reload does not count: \(p)")
        XCTAssertTrue(p.error?.hasPrefix("\(f.config):\(badLine): ") == true, "the error names file:line: \(p)")
        XCTAssertTrue(p.error?.contains("'bin/bogus'") == true, "\(p)")

        // SIGHUP with the broken file still there: another failed reload, and still generation 1.
        func failedReloads() -> Int { f.daemon.log.components(separatedBy: "policy reload failed, keeping generation 1").count - 1 }
        let failuresBefore = failedReloads()
        XCTAssertGreaterThanOrEqual(failuresBefore, 1, f.daemon.logTail)
        f.daemon.signal(SIGHUP)
        try waitUntil("the SIGHUP reload fails too", timeout: 5) {
            (f.daemon.log.contains("SIGHUP: reloading policy") && failedReloads() == failuresBefore + 1,
             String(f.daemon.log.suffix(2000)))
        }
        p = try policyStatus(f.socket)
        XCTAssertEqual(p.generation, 1, "\(p)")
        XCTAssertTrue(p.error?.hasPrefix("\(f.config):\(badLine): ") == true, "\(p)")
        let kept = try queryVerdict(f.socket, "updater").0
        XCTAssertEqual(kept.permissions["wwan"], "deny", "the old policy stays: \(kept)")
        XCTAssertEqual(kept.reason, "denied", "\(kept)")
        XCTAssertTrue(f.daemon.isRunning)

        // A good edit, no signal: inotify picks it up.
        _ = try writeConfig(Self.updaterPolicy(wwan: "allow"), in: f.dir)
        try waitUntil("STATUS shows generation 2 after the good edit", timeout: 5) {
            p = try policyStatus(f.socket)
            return (p.generation == 2, "\(p)")
        }
        XCTAssertNil(p.error, "a successful load clears the error: \(p)")
        let allowed = try queryVerdict(f.socket, "updater").0
        XCTAssertEqual(allowed.permissions["wwan"], "allow", "\(allowed)")
        XCTAssertTrue(allowed.matches(available: true, reason: "ok", via: "wwan0/wwan/true", denied: [], pending: []),
                      "\(allowed)")

        // netpermctl reload and RELOAD: one generation each.
        let reload = try ctl(["--socket", f.socket, "reload"])
        XCTAssertEqual(reload.status, 0, reload.summary)
        XCTAssertEqual(reload.stdout, "policy reloaded: generation 3, 1 app\n", reload.summary)
        XCTAssertEqual(try policyStatus(f.socket).generation, 3)
        let raw = try request(f.socket, "RELOAD")
        XCTAssertEqual(try JSONValue.bool(raw, "ok"), true, "\(raw)")
        XCTAssertEqual(try JSONValue.int(raw, "generation"), 4, "\(raw)")
        XCTAssertEqual(try policyStatus(f.socket).generation, 4)

        // A drop-in that overrides one key of [App updater] takes effect by itself.
        let dropInDir = f.config + ".d"
        try FileManager.default.createDirectory(atPath: dropInDir, withIntermediateDirectories: false)
        let dropIn = "\(dropInDir)/50-site.conf"
        try "# site override\n[App updater]\nWWAN=deny\n".write(toFile: dropIn, atomically: true, encoding: .utf8)
        try waitForVerdict(f.socket, "updater", "denied on wwan by the drop-in") {
            $0.permissions["wwan"] == "deny" && $0.reason == "denied"
        }
        p = try policyStatus(f.socket)
        XCTAssertGreaterThan(p.generation, 4, "\(p)")
        XCTAssertNil(p.error, "\(p)")
        XCTAssertEqual(p.apps, 1, "the drop-in merges into the app, it adds none: \(p)")

        // A broken drop-in: its own file and line are named; the policy with the good drop-in stays.
        let generation = p.generation
        try "# site override\n[App updater]\nWWAN=maybe\n".write(toFile: dropIn, atomically: true, encoding: .utf8)
        try waitUntil("STATUS reports the broken drop-in", timeout: 5) {
            p = try policyStatus(f.socket)
            return (p.error != nil, "\(p)")
        }
        XCTAssertEqual(p.generation, generation, "\(p)")
        XCTAssertTrue(p.error?.hasPrefix("\(dropIn):3: ") == true, "the error names the drop-in and its line: \(p)")
        XCTAssertEqual(try queryVerdict(f.socket, "updater").0.permissions["wwan"], "deny")
        let failed = try ctl(["--socket", f.socket, "reload"])
        XCTAssertEqual(failed.status, 1, failed.summary)
        XCTAssertTrue(failed.stderr.contains("policy-invalid"), failed.summary)
        XCTAssertTrue(failed.stderr.contains("\(dropIn):3:"), failed.summary)
        XCTAssertEqual(try policyStatus(f.socket).generation, generation)

        // Removing the drop-in brings the main file's WWAN=allow back, again without a signal.
        try FileManager.default.removeItem(atPath: dropIn)
        try waitForVerdict(f.socket, "updater", "ok on wwan once the drop-in is gone") { $0.reason == "ok" }
        p = try policyStatus(f.socket)
        XCTAssertGreaterThan(p.generation, generation, "\(p)")
        XCTAssertNil(p.error, "\(p)")
    }

    func testCheckValidatesFilesOffline() throws {
        let dir = try makeTempDir()
        let good = "\(dir)/good.conf"
        try Self.updaterPolicy(wwan: "deny").write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try ctl(["check", good])
        XCTAssertEqual(ok.status, 0, ok.summary)
        XCTAssertEqual(ok.stdout, "\(good): ok (1 file, 1 app, 2 interface overrides)\n", ok.summary)
        XCTAssertEqual(ok.stderr, "", ok.summary)

        let bad = "\(dir)/bad.conf"
        let badText = Self.updaterPolicy(wwan: "sometimes")
        try badText.write(toFile: bad, atomically: true, encoding: .utf8)
        let badLine = try lineNumber(of: "WWAN=", in: badText)
        let r = try ctl(["check", bad])
        XCTAssertNotEqual(r.status, 0, r.summary)
        XCTAssertTrue(r.stderr.contains("\(bad):\(badLine):"), "expected '\(bad):\(badLine):' in stderr: \(r.summary)")
        XCTAssertTrue(r.stderr.contains("sometimes"), r.summary)
        XCTAssertEqual(r.stdout, "", r.summary)

        // A good main file with a bad drop-in is bad, and the drop-in is named.
        try FileManager.default.createDirectory(atPath: good + ".d", withIntermediateDirectories: false)
        let dropIn = good + ".d/10-x.conf"
        try "[App updater]\n\nWiFi=yes\n".write(toFile: dropIn, atomically: true, encoding: .utf8)
        let withDropIn = try ctl(["check", good])
        XCTAssertNotEqual(withDropIn.status, 0, withDropIn.summary)
        XCTAssertTrue(withDropIn.stderr.contains("\(dropIn):3:"), withDropIn.summary)

        let missing = try ctl(["check", "\(dir)/missing.conf"])
        XCTAssertNotEqual(missing.status, 0, missing.summary)
        XCTAssertTrue(missing.stderr.contains("\(dir)/missing.conf"), missing.summary)
    }
}
