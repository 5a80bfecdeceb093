// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// [Enforcement] Mode=steer against the real kernel (docs/ENFORCEMENT.md, "Steer"): with the default route on
/// cellular and Wi-Fi up, an app denied cellular leaves by Wi-Fi with Wi-Fi's source address (the peer sees it),
/// fails at once when Wi-Fi goes (never by cellular), follows a decision, by uid and by unit cgroup, IPv4 and
/// IPv6; a kill or a stop leaves the rules failing closed, a restart repairs, `--remove-rules` removes everything;
/// an orphaned socket stays its app's, and one bound to a denied link's address goes nowhere.
final class SteerTests: IntegrationTestCase {
    static let policy = """
        [Enforcement]
        Mode=steer

        [Interface wwan*]
        Kind=wwan

        [Interface wifi*]
        Kind=wifi

        [App wifionly]
        User=4001
        WWAN=deny

        [App anywhere]
        User=4002
        WWAN=allow

        [App asker]
        User=4003
        WWAN=ask

        """
    /// WWAN=deny, everything else allowed: wifi, ethernet, other and metered bits.
    static let wifiOnlyMark: UInt32 = 0x6E70_001D
    static let wifi = SteerBed.address["wifi0"]!, wwan = SteerBed.address["wwan0"]!

    private var bed: SteerBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
        guard access(SteerBed.python, X_OK) == 0 else { throw HarnessError("\(SteerBed.python) is missing") }
        dir = try makeTempDir()
        bed = try SteerBed(self, dir: dir)
        showOnFailure("ip rule; routes of steering's tables; what the peer saw") {
            (((try? self.bed.rules()) ?? []) + ((try? self.bed.steeringRoutes()) ?? []) + self.bed.seen)
                .joined(separator: "\n")
        }
    }

    @discardableResult
    private func start(_ config: String = SteerTests.policy) throws -> DaemonProcess {
        let d = try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(config, in: dir), nsenter: true)
        try waitUntil("the rules are in force and steering") {
            let e = try self.request(self.socket, "STATUS")["enforcement"] as? [String: Any]
            let s = e?["steering"] as? [String: Any]
            return (e?["state"] as? String == "enforcing" && s?["state"] as? String == "steering", "\(e ?? [:])")
        }
        return d
    }

    private func query(_ app: String) throws -> [String: Any] { try request(socket, "QUERY \(app)") }

    private func assertSteered(_ p: SteerBed.Probe, family: String = "4", _ what: String,
                               file: StaticString = #filePath, line: UInt = #line) {
        let wifi = family == "6" ? Self.wifi.v6 : Self.wifi.v4
        XCTAssertTrue(p.passed, "\(what): \(p)", file: file, line: line)
        XCTAssertEqual(p.source, wifi, "\(what): TCP from Wi-Fi's address", file: file, line: line)
        XCTAssertEqual(p.udpSource, wifi, "\(what): UDP from Wi-Fi's address", file: file, line: line)
    }

    /// The peer saw this probe's TCP connection and UDP datagram from `address`, and nothing from elsewhere since
    /// `before` lines.
    private func assertPeerSaw(_ address: String, since before: Int, _ what: String,
                               file: StaticString = #filePath, line: UInt = #line) throws {
        try waitUntil("the peer saw \(what) from \(address)", timeout: 2) {
            let new = Array(self.bed.seen.dropFirst(before))
            return (Set(new) == ["tcp " + address, "udp " + address], "\(new)")
        }
    }

    func testSteersOutOfTheAllowedLinkWithItsAddress() throws {
        try start()
        let rules = try bed.rules()
        XCTAssertEqual(rules.count, 2, "one rule per family for the one mark in use (asker's pending ask is "
            + "not allowed, so asker shares wifionly's mark): \(rules)")
        for family in ["4", "6"] {
            let before = bed.seen.count
            let p = try bed.probe(uid: 4001, family: family)
            assertSteered(p, family: family, "WWAN=deny while the default is wwan, IPv\(family)")
            XCTAssertEqual(p.mark, Self.wifiOnlyMark)
            try assertPeerSaw(family == "6" ? Self.wifi.v6 : Self.wifi.v4, since: before, "the steered app")
            XCTAssertTrue(try bed.routeGet(mark: Self.wifiOnlyMark, family: family).contains("dev wifi0"))

            let before2 = bed.seen.count
            let q = try bed.probe(uid: 4002, family: family)
            XCTAssertTrue(q.passed && q.mark == 0, "an app allowed everywhere is not marked: \(q)")
            try assertPeerSaw(family == "6" ? Self.wwan.v6 : Self.wwan.v4, since: before2, "the unmarked app")
            XCTAssertEqual(try bed.probe(family: family).mark, 0, "root, in no [App], is not marked")
        }
        let v = try query("wifionly")
        XCTAssertEqual(v["available"] as? Bool, true, "\(v)")
        XCTAssertEqual(v["reason"] as? String, "ok")
        XCTAssertEqual((v["via"] as? [String: Any])?["name"] as? String, "wifi0", "via is the steered link")
        XCTAssertEqual(v["enforced"] as? Bool, true)
        XCTAssertEqual((try query("anywhere")["via"] as? [String: Any])?["name"] as? String, "wwan0")
        let s = try XCTUnwrap((try request(socket, "STATUS")["enforcement"] as? [String: Any])?["steering"] as? [String: Any])
        XCTAssertEqual(s["tables"] as? Int, 1)
        XCTAssertEqual(s["marked_uids"] as? Int, 2)
        // The verdict is the kernel's answer with the mark: another tool's rule ahead of steering's shows in it.
        try bed.ns.ip("rule", "add", "pref", "100", "fwmark", "0x" + String(Self.wifiOnlyMark, radix: 16), "lookup", "main")
        try waitUntil("the verdict follows the foreign rule") {
            let q = try self.query("wifionly")
            let e = (q["egress"] as? [String: Any])?["ipv4"] as? [String: Any]
            return (e?["name"] as? String == "wwan0" && q["available"] as? Bool == false, "\(q)")
        }
        try bed.ns.ip("rule", "del", "pref", "100")
        try waitUntil("and back") { ((try self.query("wifionly")["via"] as? [String: Any])?["name"] as? String == "wifi0", "") }
        // Blocking stays: a socket bound to wwan0 escapes steering and is rejected by the nft table.
        XCTAssertNotNil(try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "nft", "list", "table", "inet",
                                            "netpermd"]).stdout.range(of: "uid_wwan"))
    }

    func testNoFallbackWhenWifiGoesAndADecisionUnmarks() throws {
        try start()
        assertSteered(try bed.probe(uid: 4001), "before")
        // Wi-Fi loses carrier: its routes stay in the main table (linkdown), but not in the steered table.
        try bed.peer.ip("link", "set", "p2", "down")
        try waitUntil("wifi0 is gone from the steered table") {
            let r = try self.bed.steeringRoutes()
            return (!r.contains { $0.contains("wifi0") }, "\(r)")
        }
        let before = bed.seen.count
        for family in ["4", "6"] {
            let p = try bed.probe(uid: 4001, family: family)
            XCTAssertEqual(p.tcp, "EHOSTUNREACH", "no allowed link: connect() fails, IPv\(family): \(p)")
            XCTAssertEqual(p.udp, "EHOSTUNREACH", "no allowed link: send() fails, IPv\(family): \(p)")
            XCTAssertLessThan(p.ms, 100, "at once")
            print("steer: connect() with no allowed link failed with \(p.tcp) after \(p.ms) ms (IPv\(family))")
        }
        // The table's lookup ends in its unreachable default, not in main's wwan0 (which nft would then reject).
        for family in ["4", "6"] {
            let r = try Subprocess.run(["ip", "-n", bed.ns.name, family == "6" ? "-6" : "-4", "route", "get",
                                        family == "6" ? SteerBed.server.v6 : SteerBed.server.v4,
                                        "mark", "0x" + String(Self.wifiOnlyMark, radix: 16)])
            XCTAssertTrue(r.status != 0 && r.stderr.contains("No route to host"), "IPv\(family): \(r.summary)")
        }
        let v = try query("wifionly")
        XCTAssertEqual(v["available"] as? Bool, false)
        XCTAssertTrue(v["via"] is NSNull, "\(v)")
        // Bounded: anything the probes had sent would have arrived by the time a fresh connection does.
        let marker = try bed.probe(uid: 4002)
        XCTAssertTrue(marker.passed)
        try waitUntil("the marker arrived", timeout: 2) { (self.bed.seen.count >= before + 2, "\(self.bed.seen)") }
        XCTAssertEqual(Array(bed.seen.dropFirst(before)), ["tcp " + Self.wwan.v4, "udp " + Self.wwan.v4],
                       "nothing of the steered app left by wwan0")

        try bed.peer.ip("link", "set", "p2", "up")
        try waitUntil("steered again once wifi0 is back") {
            let p = try self.bed.probe(uid: 4001)
            return (p.passed && p.source == Self.wifi.v4, "\(p)")
        }

        // asker's undecided ask is steered like a deny; a decision allowing wwan removes its mark.
        assertSteered(try bed.probe(uid: 4003), "asker, undecided")
        XCTAssertEqual(try request(socket, "DECIDE asker wwan allow")["ok"] as? Bool, true)
        try waitUntil("asker leaves by wwan0 after its decision") {
            let p = try self.bed.probe(uid: 4003)
            return (p.passed && p.mark == 0 && p.source == Self.wwan.v4, "\(p)")
        }
        XCTAssertEqual((try query("asker")["via"] as? [String: Any])?["name"] as? String, "wwan0")
    }

    /// A Unit= app by its cgroup (a test cgroup in a slice of the test's own, removed at teardown), IPv6.
    func testUnitCgroupIsSteered() throws {
        let slice = try EnforcementBed.makeTestSlice(self)
        let svc = "npt-steer-\(getpid()).service"
        let svcDir = slice + "/" + svc
        XCTAssertEqual(mkdir(svcDir, 0o755), 0)
        addTeardownBlock { rmdir(svcDir) }
        // The unit's app (WWAN=deny) comes before the uid's (allowed everywhere): its sockets are steered.
        try start(Self.policy + "[App svc]\nUnit=\(svc)\nWWAN=deny\n")
        try waitUntil("svc is enforced") { (try self.query("svc")["enforced"] as? Bool == true, "") }
        for family in ["6", "4"] {
            let before = bed.seen.count
            assertSteered(try bed.probe(uid: 4002, cgroup: svcDir, family: family), family: family,
                          "uid 4002 in svc's cgroup, IPv\(family)")
            try assertPeerSaw(family == "6" ? Self.wifi.v6 : Self.wifi.v4, since: before, "svc")
        }
        XCTAssertEqual(try bed.probe(uid: 4002).source, Self.wwan.v4, "the same uid outside the cgroup")
    }

    func testKillRestartAndCleanStop() throws {
        var d = try start()
        assertSteered(try bed.probe(uid: 4001), "first run")
        XCTAssertTrue(try SteerBed.programNames().contains("netpermd_steer"))
        d.forceStop()
        // The program went with the daemon (its bpf_link); rules, tables and the nft table stay: fail closed.
        XCTAssertEqual(try bed.rules().count, 2, "SIGKILL leaves the rules")
        let p = try bed.probe(uid: 4001)
        XCTAssertEqual(p.mark, 0, "no program marks new sockets")
        XCTAssertEqual(p.tcp, "ECONNREFUSED", "unmarked, by wwan0, rejected by the nft table left behind: \(p)")

        d = try start()
        assertSteered(try bed.probe(uid: 4001), "restarted")
        let again = try bed.rules()
        XCTAssertEqual(again.count, 2, "repaired, not doubled: \(again)")
        XCTAssertEqual(try SteerBed.programNames().filter { $0 == "netpermd_steer" }.count, 1)

        // A stop (a restart, an upgrade) fails closed as a kill does: rules, tables and the nft table stay.
        stopDaemon(d)
        XCTAssertEqual(try bed.rules().count, 2, "a stop leaves the rules")
        XCTAssertFalse(try bed.steeringRoutes().isEmpty, "and the tables")
        XCTAssertFalse(try SteerBed.programNames().contains("netpermd_steer"), "the program went with the daemon")
        XCTAssertEqual(try bed.probe(uid: 4001).tcp, "ECONNREFUSED", "stopped: unmarked, rejected by the nft table")
        // netpermd --remove-rules (what an uninstall runs) removes all of it.
        let removed = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", netpermd, "--remove-rules"])
        XCTAssertEqual(removed.status, 0, removed.summary)
        XCTAssertTrue(removed.stdout.hasPrefix("netpermd: removed table inet netpermd, "), removed.stdout)
        XCTAssertEqual(try bed.rules(), [], "--remove-rules removes the rules")
        XCTAssertEqual(try bed.steeringRoutes(), [], "and the tables")
        XCTAssertEqual(try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "nft", "list", "tables"]).stdout,
                       "", "and the nft table")
        let q = try bed.probe(uid: 4001)
        XCTAssertTrue(q.passed && q.source == Self.wwan.v4, "nothing enforced or steered: \(q)")

        // Killed again, and started in Mode=block: what steering left is removed, the nft table loaded.
        d = try start()
        d.forceStop()
        XCTAssertEqual(try bed.rules().count, 2)
        let block = try startDaemon(in: bed.ns, socket: socket, config: try writeConfig(
            Self.policy.replacingOccurrences(of: "Mode=steer", with: "Mode=block"), in: dir), nsenter: true)
        try waitUntil("Mode=block removes steering's leftovers") {
            let r = try self.bed.rules() + self.bed.steeringRoutes()
            return (r.isEmpty, "\(r)")
        }
        let b = try bed.probe(uid: 4001)
        XCTAssertEqual(b.tcp, "ECONNREFUSED", "block mode: by wwan0, rejected: \(b)")
        stopDaemon(block)
    }

    /// A socket of an app allowed everywhere (unmarked, out of wwan0, the default), closed with its data queued,
    /// then its app denied WWAN: steering marks only new sockets, and the orphaned one has no file for `meta
    /// skuid` to name, so its connection's tag keeps it off wwan0. Before, all of its data left by wwan0.
    func testAnOrphanedSocketStaysItsAppsAfterADecision() throws {
        let held = try HeldPeer(self, in: bed.peer, port: 7779, dir: dir + "/held")
        let sniffer = try Sniffer(self, in: bed.peer, interface: "p1", sources: [Self.wwan.v4], dir: dir)
        try start()
        XCTAssertEqual(try request(socket, "DECIDE asker wwan allow")["ok"] as? Bool, true)
        let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "setpriv", "--reuid", "4003", "--regid",
                                    "4003", "--clear-groups", SteerBed.python, "-c", orphaningClient, SteerBed.server.v4, "7779"])
        let port = try XCTUnwrap(r.lines.last?.split(separator: " ").first.flatMap { Int($0) }, r.summary)
        try waitUntil("the sniffer saw it connect over wwan0") { (sniffer.packets.contains { $0.sourcePort == port }, "") }
        XCTAssertEqual(try request(socket, "DECIDE asker wwan deny")["ok"] as? Bool, true)
        let denied = monotonicNow()
        held.release(1)
        print("steer: orphan: the server read \(try held.read(1, test: self)) bytes")
        // Root's datagram after it: everything sent before was judged.
        try waitUntil("the sniffer sees root's datagram") {
            _ = try Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", SteerBed.python, "-c",
                                    "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'end', ('\(SteerBed.server.v4)', 9998))"])
            return (sniffer.packets.contains { $0.destinationPort == 9998 }, "")
        }
        let leaked = sniffer.packets.filter { $0.proto == 6 && $0.sourcePort == port && $0.payload > 0 && $0.time > denied }
        XCTAssertEqual(leaked.map(\.description), [], "the orphaned socket's data out of wwan0 after the app was denied")
    }

    /// A steered app's socket bound to wwan0's address: its mark's table would send it out of Wi-Fi with wwan0's
    /// source (and the replies back over wwan0); the source rule sends it nowhere instead, so connect() and
    /// sendto() fail at once, IPv4 and IPv6, and Wi-Fi's peer sees nothing from that address. Before, it connected.
    func testASocketBoundToTheWwanAddressNeverLeavesByWifi() throws {
        let sniffer = try Sniffer(self, in: bed.peer, interface: "p2", sources: [Self.wwan.v4, Self.wwan.v6], dir: dir)
        try start()
        let rules = try bed.ns.ip("rule").stdout
        XCTAssertTrue(rules.contains("28238:\tfrom 10.81.0.1 fwmark 0x6e70001d lookup 28240"), rules)
        let bound = """
            import errno, socket, sys, time
            src, dst = sys.argv[1], sys.argv[2]
            fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
            def name(e): return errno.errorcode.get(e.errno, str(e.errno))
            s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(2); s.bind((src, 0))
            t = time.monotonic()
            try: s.connect((dst, 7777)); r = "ok"
            except socket.timeout: r = "timeout"
            except OSError as e: r = name(e)
            ms = int((time.monotonic() - t) * 1000)
            u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((src, 0))
            try: u.sendto(b"x", (dst, 7777)); r2 = "ok"
            except OSError as e: r2 = name(e)
            print(r, ms, r2)
            """
        for (src, dst) in [(Self.wwan.v4, SteerBed.server.v4), (Self.wwan.v6, SteerBed.server.v6)] {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "setpriv", "--reuid", "4001",
                                        "--regid", "4001", "--clear-groups", SteerBed.python, "-c", bound, src, dst])
            let f = (r.lines.last ?? "").split(separator: " ")
            XCTAssertEqual(f.count, 3, r.summary)
            XCTAssertEqual(f.first, "EHOSTUNREACH", "connect() from \(src): \(r.summary)")
            XCTAssertLessThan(Int(f.count > 1 ? f[1] : "") ?? 9999, 200, "at once")
            XCTAssertEqual(f.last, "EHOSTUNREACH", "sendto() from \(src)")
        }
        assertSteered(try bed.probe(uid: 4001), "unbound, the same app leaves by Wi-Fi")
        XCTAssertEqual(sniffer.packets.map(\.description), [], "nothing with wwan0's source on Wi-Fi's peer")
        // The rules follow the addresses.
        try bed.ns.ip("addr", "add", "10.81.0.9/24", "dev", "wwan0")
        try waitUntil("a rule for wwan0's new address") {
            let r = try self.bed.ns.ip("rule").stdout
            return (r.contains("from 10.81.0.9 fwmark"), r)
        }
        try bed.ns.ip("addr", "del", "10.81.0.9/24", "dev", "wwan0")
        try waitUntil("its rule goes with it") {
            let r = try self.bed.ns.ip("rule").stdout
            return (!r.contains("from 10.81.0.9 ") && r.contains("from 10.81.0.1 fwmark"), r)
        }
    }
}
