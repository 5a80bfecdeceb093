import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// [Enforcement] Mode=steer against the real kernel (docs/ENFORCEMENT.md, "Steer"): with the default route on
/// cellular and Wi-Fi up, an app denied cellular leaves by Wi-Fi with Wi-Fi's source address (the peer sees it),
/// fails at once when Wi-Fi goes (never by cellular), follows a decision, by uid and by unit cgroup, IPv4 and
/// IPv6; a kill leaves the rules failing closed, a restart repairs, a clean stop removes everything.
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
        for tool in ["nft", "nsenter", "setpriv"] where !Subprocess.resolve(tool).hasPrefix("/") {
            throw HarnessError("\(tool) is not installed (make deps installs nftables and util-linux)")
        }
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
        XCTAssertEqual(p.tcp, "EHOSTUNREACH", "unmarked, by wwan0, rejected by the nft table left behind: \(p)")

        d = try start()
        assertSteered(try bed.probe(uid: 4001), "restarted")
        let again = try bed.rules()
        XCTAssertEqual(again.count, 2, "repaired, not doubled: \(again)")
        XCTAssertEqual(try SteerBed.programNames().filter { $0 == "netpermd_steer" }.count, 1)

        stopDaemon(d)
        XCTAssertEqual(try bed.rules(), [], "a clean stop removes the rules")
        XCTAssertEqual(try bed.steeringRoutes(), [], "and the tables")
        XCTAssertEqual(try Subprocess.run(["nsenter", "--net=/run/netns/\(bed.ns.name)", "nft", "list", "tables"]).stdout,
                       "", "and the nft table")
        XCTAssertFalse(try SteerBed.programNames().contains("netpermd_steer"), "and the program")
        let q = try bed.probe(uid: 4001)
        XCTAssertTrue(q.passed && q.source == Self.wwan.v4, "stopped: nothing enforced or steered: \(q)")

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
        XCTAssertEqual(b.tcp, "EHOSTUNREACH", "block mode: by wwan0, rejected: \(b)")
        stopDaemon(block)
    }
}
