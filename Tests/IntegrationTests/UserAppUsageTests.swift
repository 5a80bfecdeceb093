// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 47, "its data is its own", against the real kernel: a desktop app's scope of a test uid (made by the test
/// at the cgroup root as a user manager lays it out: `npt-user-PID.slice/user-UID.slice/user@UID.service/app.slice/
/// app-gnome-org.gnome.Maps-N.scope`) sends and receives known traffic; USAGE shows it under that app for that uid,
/// byte for byte what the peer's own nft counters saw, while the uid's app still counts every byte; each user sees
/// only their own uid's part, and a scope another user names after the app counts for that user alone. Its scopes
/// are desktop apps to every daemon running (make test runs it alone, with the timed suites).
final class UserAppUsageTests: IntegrationTestCase {
    static let sender = UsageTests.sender, receiver = UsageTests.receiver
    static let maps = "org.gnome.Maps"

    private var bed: UsageBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    /// Made by the test, deepest last; removed deepest first.
    private var made: [String] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
        dir = try makeTempDir()
        chmod(dir, 0o755)   // the socket is reached by unprivileged users too
        bed = try UsageBed(self, dir: dir)
        addTeardownBlock { [unowned self] in EnforcementBed.removeCgroups(self.made.map { Array($0.utf8CString) }) }
        showOnFailure("nft list table inet netpermd_usage") {
            (try? Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "table", "inet",
                                  "netpermd_usage"]).stdout) ?? "?"
        }
    }

    private func mkdirs(_ path: String) throws -> String {
        guard mkdir(path, 0o755) == 0 else { throw HarnessError("mkdir \(path): \(String(cString: strerror(errno)))") }
        made.append(path)
        return path
    }

    /// A desktop app's scope in `uid`'s own manager, below `top`.
    private func scope(_ top: String, uid: UInt32, _ unit: String) throws -> String {
        let manager = try mkdirs(try mkdirs(top + "/user-\(uid).slice") + "/user@\(uid).service")
        return try mkdirs(try mkdirs(manager + "/app.slice") + "/" + unit)
    }

    /// A total of USAGE's entry on `kind`, this period: bytes sent and received.
    private func bytes(_ entry: [String: Any]?, _ kind: String) -> (sent: Int, received: Int) {
        let kinds = ((entry?["current"] as? [String: Any])?["kinds"] as? [[String: Any]]) ?? []
        let k = kinds.first { $0["kind"] as? String == kind }
        return (k?["sent_bytes"] as? Int ?? 0, k?["received_bytes"] as? Int ?? 0)
    }

    private func app(_ r: [String: Any], _ id: String) -> [String: Any]? {
        (r["apps"] as? [[String: Any]])?.first { $0["app"] as? String == id }
    }

    private func userApp(_ r: [String: Any], uid: UInt32, _ id: String) -> [String: Any]? {
        (r["user_apps"] as? [[String: Any]])?.first { $0["app"] as? String == id && $0["uid"] as? Int == Int(uid) }
    }

    private func peer(_ name: String) throws -> Int { try bed.peerCounter(name).bytes }

    private func asUser(_ uid: UInt32, _ args: [String]) throws -> CommandResult {
        try Subprocess.run(["setpriv", "--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", netpermctl,
                            "--socket", socket] + args)
    }

    private func start(report: Bool = false, policy: String? = nil) throws -> DaemonProcess {
        let text = policy ?? UsageTests.policy(mode: "off", extra: report ? "\n[Report]\nEnabled=yes\n" : "")
        let config = try writeConfig(text, in: dir)
        let d = try startDaemon(in: bed.ns, socket: socket, config: config, nsenter: true)
        try waitUntil("counting is in force") {
            let u = try self.request(self.socket, "STATUS")["usage"] as? [String: Any]
            return (u?["state"] as? String == "counting", "\(u ?? [:])")
        }
        return d
    }

    /// Maps of the sender's uid, and a scope the receiver's uid names after it (his to name as he likes), once the
    /// counting table has each in its users' units.
    private func mapsScopesCountedApart() throws -> (hers: String, his: String) {
        let top = try mkdirs(try EnforcementBed.cgroupRoot() + "/npt-user-\(getpid()).slice")
        let hers = try scope(top, uid: Self.sender, "app-gnome-\(Self.maps)-\(getpid()).scope")
        let his = try scope(top, uid: Self.receiver, "app-gnome-\(Self.maps)-\(getpid())9.scope")
        try waitUntil("both scopes are counted apart") {
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "set", "inet",
                                        "netpermd_usage", "user_units"])
            return (r.stdout.contains(hers.split(separator: "/").last!) && r.stdout.contains(his.split(separator: "/").last!),
                    r.summary)
        }
        return (hers, his)
    }

    func testADesktopAppsBytesAreItsOwnForItsUid() throws {
        var daemon = try start()
        let (hers, his) = try mapsScopesCountedApart()
        let base = try request(socket, "USAGE")

        // Hers: 300 datagrams of 1,000 bytes over wwan0 and their echoes, a 2 MiB upload over eth0.
        var peerWas = (try peer("echo_in"), try peer("echo_out"), try peer("sink_in"), try peer("sink_out"))
        let udp = try bed.client(uid: Self.sender, cgroup: hers, "udp", "wwan0", "300", "1000")
        XCTAssertEqual(udp["echoed"] as? Int, 300, "\(udp)")
        let up = try bed.client(uid: Self.sender, cgroup: hers, "upload", "eth0", String(2 << 20))
        XCTAssertNil(up["error"] as? String, "\(up)")
        let mapsWWAN = (try peer("echo_in") - peerWas.0, try peer("echo_out") - peerWas.1)
        let mapsEth = (try peer("sink_in") - peerWas.2, try peer("sink_out") - peerWas.3)
        XCTAssertEqual(mapsWWAN.0, 300 * 1028)
        // Her uid outside the scope: her app's, not Maps'.
        peerWas.0 = try peer("echo_in")
        _ = try bed.client(uid: Self.sender, "udp", "wwan0", "50", "500")
        let outside = try peer("echo_in") - peerWas.0
        // His scope named like her app: 40 datagrams of 300 bytes.
        peerWas.0 = try peer("echo_in")
        peerWas.1 = try peer("echo_out")
        _ = try bed.client(uid: Self.receiver, cgroup: his, "udp", "wwan0", "40", "300")
        let hisWWAN = (try peer("echo_in") - peerWas.0, try peer("echo_out") - peerWas.1)

        let r = try request(socket, "USAGE")
        let mine = bytes(userApp(r, uid: Self.sender, Self.maps), "wwan")
        XCTAssertEqual(mine.sent, mapsWWAN.0, "Maps of \(Self.sender), UDP sent over wwan, exactly what the peer got: \(r)")
        XCTAssertEqual(mine.received, mapsWWAN.1, "and received, exactly")
        let eth = bytes(userApp(r, uid: Self.sender, Self.maps), "ethernet")
        for (what, counted, truth) in [("TCP sent", eth.sent, mapsEth.0), ("TCP received (its ACKs)", eth.received, mapsEth.1)] {
            XCTAssertLessThanOrEqual(abs(Double(counted - truth)) / Double(max(truth, 1)), 0.01,
                                     "\(what): counted \(counted), the peer's kernel \(truth)")
            print("user app usage accuracy: \(what): counted \(counted), peer \(truth)")
        }
        // Her uid's app still counts every byte, Maps' and the rest.
        let senderGrew = bytes(app(r, "sender"), "wwan").sent - bytes(app(base, "sender"), "wwan").sent
        XCTAssertEqual(senderGrew, mapsWWAN.0 + outside, "the uid's app keeps every byte of its uid")
        // His scope: his uid's part alone, nothing onto hers, and in his own uid's app.
        let theirs = bytes(userApp(r, uid: Self.receiver, Self.maps), "wwan")
        XCTAssertEqual(theirs.sent, hisWWAN.0)
        XCTAssertEqual(theirs.received, hisWWAN.1)
        XCTAssertEqual(bytes(app(r, "receiver"), "wwan").sent - bytes(app(base, "receiver"), "wwan").sent, hisWWAN.0)
        XCTAssertNil(app(r, Self.maps).flatMap { bytes($0, "wwan").sent > 0 ? $0 : nil }, "no app's count gains a byte")

        // Each user sees their own uid's part, in netpermctl's words too.
        let herLines = try asUser(Self.sender, ["-t", "usage"])
        XCTAssertEqual(herLines.status, 0, herLines.summary)
        let ownRows = herLines.lines.filter { $0.hasPrefix(Self.maps + ":") }
        XCTAssertFalse(ownRows.isEmpty, herLines.stdout)
        XCTAssertTrue(ownRows.allSatisfy { $0.hasSuffix(":\(Self.sender)") }, herLines.stdout)
        XCTAssertTrue(ownRows.contains { $0.hasPrefix("\(Self.maps):current:wwan:yes:\(mine.sent):\(mine.received):") },
                      herLines.stdout)
        let human = try asUser(Self.sender, ["usage"])
        XCTAssertTrue(human.stdout.contains("\(Self.maps) (uid \(Self.sender))"), human.stdout)
        XCTAssertFalse(human.stdout.contains("uid \(Self.receiver)"), human.stdout)
        let hisLines = try asUser(Self.receiver, ["-t", "usage", Self.maps])
        XCTAssertEqual(hisLines.status, 0, hisLines.summary)
        XCTAssertEqual(Set(hisLines.lines.map { String($0.split(separator: ":", omittingEmptySubsequences: false).last!) }),
                       ["\(Self.receiver)"], "his own part only: \(hisLines.stdout)")
        let nobody = try asUser(4199, ["usage", Self.maps])
        XCTAssertEqual(nobody.status, 1, nobody.summary)
        XCTAssertTrue(nobody.stderr.contains("not-found"), nobody.summary)

        // A restart, with Maps sending while no daemon runs: kept, and its unit's counter read on from where the
        // last process saved it (counted once).
        stopDaemon(daemon)
        peerWas.0 = try peer("echo_in")
        XCTAssertEqual(try bed.client(uid: Self.sender, cgroup: hers, "udp", "wwan0", "20", "1000")["echoed"] as? Int, 20)
        let meanwhile = try peer("echo_in") - peerWas.0
        daemon = try start()
        let after = bytes(userApp(try request(socket, "USAGE"), uid: Self.sender, Self.maps), "wwan")
        XCTAssertEqual(after.sent, mine.sent + meanwhile, "a restart keeps Maps' part and loses nothing of it")
        XCTAssertEqual(bytes(userApp(try request(socket, "USAGE"), uid: Self.receiver, Self.maps), "wwan").sent, theirs.sent)
    }

    /// Issue 50, "per uid for a user's own apps": a user's own unit's connections are in the report as that app of
    /// that uid (ReportUnits: its cgroup id in the connection's labels), at the peers' addresses the test chose and
    /// over the links it sent by; the uid's other connections stay its uid's app's; each user reads only their own.
    func testAUsersOwnAppsDestinationsAreInTheirReport() throws {
        _ = try start(report: true)
        let (hers, his) = try mapsScopesCountedApart()
        for uid in [Self.sender, Self.receiver] {
            let on = try asUser(uid, ["report", "on"])
            XCTAssertEqual(on.status, 0, on.summary)
        }
        // Hers: one UDP flow over wwan0, one TCP connection over eth0; her uid outside the scope: one flow over eth0.
        XCTAssertEqual(try bed.client(uid: Self.sender, cgroup: hers, "udp", "wwan0", "3", "100")["echoed"] as? Int, 3)
        XCTAssertNil(try bed.client(uid: Self.sender, cgroup: hers, "upload", "eth0", "1000")["error"] as? String)
        XCTAssertEqual(try bed.client(uid: Self.sender, "udp", "eth0", "1", "100")["echoed"] as? Int, 1)
        // His scope named like her app: one flow over wwan0.
        XCTAssertEqual(try bed.client(uid: Self.receiver, cgroup: his, "udp", "wwan0", "2", "100")["echoed"] as? Int, 2)
        let wwanPeer = bed.peers["wwan0"]!, ethPeer = bed.peers["eth0"]!

        func rows(_ r: [String: Any]) -> Set<String> {
            var out: Set<String> = []
            for a in r["apps"] as? [[String: Any]] ?? [] {
                for d in a["destinations"] as? [[String: Any]] ?? [] {
                    out.insert("\(a["app"] as? String ?? "?") \(a["uid"] as? Int ?? -1) \(d["host"] as? String ?? "?") "
                        + "\(d["kind"] as? String ?? "?") \(d["connections"] as? Int ?? -1)")
                }
            }
            return out
        }
        let expected: Set<String> = [
            "\(Self.maps) \(Self.sender) \(wwanPeer) wwan 1", "\(Self.maps) \(Self.sender) \(ethPeer) ethernet 1",
            "sender \(Self.sender) \(ethPeer) ethernet 1", "\(Self.maps) \(Self.receiver) \(wwanPeer) wwan 1",
        ]
        var all: Set<String> = []
        try waitUntil("the report has every connection", timeout: 10) {
            all = rows(try self.request(self.socket, "REPORT"))
            return (expected.isSubset(of: all), "\(all)")
        }
        XCTAssertEqual(all, expected, "exactly these, nothing of another uid's onto hers")

        // Each user reads their own uid's only, the app named or not; another's app is not found.
        let herReport = try asUser(Self.sender, ["--json", "report"])
        XCTAssertEqual(herReport.status, 0, herReport.summary)
        XCTAssertEqual(rows(try JSONValue.object(herReport.stdout.trimmingCharacters(in: .whitespacesAndNewlines))),
                       expected.filter { $0.contains(" \(Self.sender) ") })
        let hisMaps = try asUser(Self.receiver, ["--json", "report", Self.maps])
        XCTAssertEqual(hisMaps.status, 0, hisMaps.summary)
        XCTAssertEqual(rows(try JSONValue.object(hisMaps.stdout.trimmingCharacters(in: .whitespacesAndNewlines))),
                       ["\(Self.maps) \(Self.receiver) \(wwanPeer) wwan 1"])
        let nobody = try asUser(4199, ["report", Self.maps])
        XCTAssertEqual(nobody.status, 1, nobody.summary)
        XCTAssertTrue(nobody.stderr.contains("not-found"), nobody.summary)
    }
    /// Issue 50, "what each app was refused", for a user's own apps (ReportRefusals: a refused packet of a user's
    /// unit is logged with its cgroup's mark): a policy-named unit of her uid denied wwan, and Maps' scope of her uid,
    /// whose uid's app is over its metered budget, each try a TCP connect and a UDP datagram over wwan0; each refusal
    /// is in the report under the unit's app for her uid, with its reason and the peer the test sent to (which got
    /// none of it), and her uid's app has only what she sent outside any unit.
    func testAUsersOwnAppsRefusalsAreInTheirReport() throws {
        let policy = UsageTests.policy(mode: "block", budget: "1", extra: """

            [App blocked]
            UserUnit=npt-blocked-*.scope
            WWAN=deny

            [Report]
            Enabled=yes
            """)
        _ = try start(policy: policy)
        let top = try mkdirs(try EnforcementBed.cgroupRoot() + "/npt-user-\(getpid()).slice")
        let apps = try mkdirs(try mkdirs(try mkdirs(top + "/user-\(Self.sender).slice") + "/user@\(Self.sender).service")
                              + "/app.slice")
        let blocked = try mkdirs(apps + "/npt-blocked-\(getpid()).scope")
        let maps = try mkdirs(apps + "/app-gnome-\(Self.maps)-\(getpid()).scope")
        try waitUntil("the unit's app is enforced and both units are counted apart") {
            let q = try self.request(self.socket, "QUERY blocked")
            let r = try Subprocess.run(["nsenter", "--net=/run/netns/\(self.bed.ns.name)", "nft", "list", "set", "inet",
                                        "netpermd_usage", "user_units"])
            return (q["enforced"] as? Bool == true && r.stdout.contains("npt-blocked-") && r.stdout.contains("app-gnome-"),
                    "\(q["enforced_why"] ?? "") \(r.summary)")
        }
        XCTAssertEqual(try asUser(Self.sender, ["report", "on"]).status, 0)

        let was = (try peer("sink_in"), try peer("echo_in"))
        let denied = try bed.client(uid: Self.sender, cgroup: blocked, "probe", "wwan0")
        let over = try bed.client(uid: Self.sender, cgroup: maps, "probe", "wwan0")
        let outside = try bed.client(uid: Self.sender, "probe", "wwan0")
        for (who, r) in [("denied", denied), ("over budget", over), ("outside", outside)] {
            XCTAssertEqual(r["tcp"] as? String, "ECONNREFUSED", "\(who): \(r)")
            XCTAssertEqual(r["udp"] as? String, "EPERM", "\(who): \(r)")
        }
        XCTAssertEqual(try peer("sink_in") - was.0, 0, "the peer received no connection")
        XCTAssertEqual(try peer("echo_in") - was.1, 0, "nor a datagram")

        // app uid host kind: connections, denied, ask, budget; each a TCP SYN and a UDP datagram to the wwan peer.
        let host = bed.peers["wwan0"]!
        let expected = [
            "blocked \(Self.sender) \(host) wwan": [0, 2, 0, 0],
            "\(Self.maps) \(Self.sender) \(host) wwan": [0, 0, 0, 2],
            "sender \(Self.sender) \(host) wwan": [0, 0, 0, 2],
        ]
        func rows() throws -> [String: [Int]] {
            var out: [String: [Int]] = [:]
            for a in try request(socket, "REPORT")["apps"] as? [[String: Any]] ?? [] {
                for d in a["destinations"] as? [[String: Any]] ?? [] {
                    let r = d["refused"] as? [String: Any]
                    out["\(a["app"] as? String ?? "?") \(a["uid"] as? Int ?? -1) \(d["host"] as? String ?? "?") "
                        + "\(d["kind"] as? String ?? "?")"] = [d["connections"] as? Int ?? -1]
                        + ["denied", "ask", "budget"].map { r?[$0] as? Int ?? -1 }
                }
            }
            return out
        }
        var last: [String: [Int]] = [:]
        try waitUntil("the report has each refusal under its unit's app", timeout: 10) {
            last = try rows()
            return (last == expected, "\(last)")
        }
        XCTAssertEqual(last, expected, "nothing of the units' onto her uid's app")
        // Her own reading: the same three, each her uid's.
        let hers = try asUser(Self.sender, ["--json", "report"])
        XCTAssertEqual(hers.status, 0, hers.summary)
        let read = try JSONValue.object(hers.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(Set((read["apps"] as? [[String: Any]] ?? []).map { "\($0["app"] as? String ?? "?") \($0["uid"] as? Int ?? -1)" }),
                       ["blocked \(Self.sender)", "\(Self.maps) \(Self.sender)", "sender \(Self.sender)"])
    }
}
