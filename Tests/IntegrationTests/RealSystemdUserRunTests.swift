// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `netpermctl run --app NAME -- COMMAND` by users who are not root, under a real systemd (RealSystemd) with the
/// real `systemd --user` of two test users (RealSystemdUsers): COMMAND runs in a scope of the user's own manager,
/// the daemon takes it for NAME, and the kernel's rules follow the scope as a user unit, which only narrows what
/// its uid may do (docs/ENFORCEMENT.md). A machine that cannot boot systemd fails this test; it never skips.
final class RealSystemdUserRunTests: IntegrationTestCase {
    /// [App npt-allowed] (User=) may use WWAN; [App npt-denied] may not.
    static let allowed = 4010, denied = 4011

    static let policy = """
        [Enforcement]
        Mode=block

        [Defaults]
        WWAN=allow

        [Interface wlan0]
        Kind=wifi

        [Interface wwan0]
        Kind=wwan

        # Executable= only: the kernel cannot tell it apart, except in the scope `netpermctl run --app tool` makes.
        [App tool]
        Executable=/nonexistent/tool
        WWAN=deny

        # Allows WWAN, which npt-denied's uid may not use: a user's scope of it must not widen the uid. Its
        # Ethernet=deny gives its scopes an element in the rules (an allow has none), so the test sees them loaded.
        [App wide]
        Executable=/nonexistent/wide
        WWAN=allow
        Ethernet=deny

        [App npt-allowed]
        User=4010
        WWAN=allow

        [App npt-denied]
        User=4011
        WWAN=deny

        """

    static let probe = wwanProbe

    struct Probe: CustomStringConvertible {
        var tcp: String, ms: Int, udp: String
        init(_ lines: [String]) throws {
            guard let p = lines.first(where: { $0.hasPrefix("probe ") })?.split(separator: " "), p.count == 4 else {
                throw HarnessError("no probe line in \(lines)")
            }
            tcp = String(p[1]); ms = Int(p[2]) ?? -1; udp = String(p[3])
        }
        /// docs/ENFORCEMENT.md, "What apps see", for IPv4: refused at once.
        var refused: Bool { tcp == "ECONNREFUSED" && udp == "EPERM" && ms < 500 }
        /// Sent: the SYN left (nobody answers it: the link's far end has no address) and so did the datagram.
        var passed: Bool { tcp == "timeout" && udp == "ok" }
        var description: String { "tcp \(tcp) (\(ms) ms), udp \(udp)" }
    }

    /// What a command run by `netpermctl run` as `uid` saw from inside its scope.
    typealias InScope = HeldScope

    func testRunAsAUserIsAScopeOfTheirOwnManagerThatOnlyNarrows() throws {
        let sd = try bootRealSystemd(policy: Self.policy)
        try startEnforcing(sd)
        showOnFailure("nft list table inet netpermd") {
            (try? sd.run(["nft", "list", "table", "inet", "netpermd"]))?.stdout ?? "(nft failed)"
        }
        try startUsers(sd)

        // 4010 may use WWAN; app tool may not. In tool's scope the uid's allow is narrowed.
        let tool = try runInScope(sd, uid: Self.allowed, app: "tool") { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (Self.elements(of: "user5_wwan", in: table).contains("\"\(cgroup)\" : goto deny"), table)
        }
        XCTAssertTrue(tool.unit.hasPrefix("app-netpermd-tool-") && tool.unit.hasSuffix(".scope"), tool.unit)
        XCTAssertEqual(tool.cgroup, "user.slice/user-4010.slice/user@4010.service/app.slice/\(tool.unit)", tool.output)
        XCTAssertEqual(tool.query["app"] as? String, "tool", "\(tool.query)")
        XCTAssertEqual(tool.query["matched_by"] as? String, "unit", "\(tool.query)")
        let toolID = tool.query["identity"] as? [String: Any]
        XCTAssertEqual(toolID?["unit"] as? String, tool.unit, "\(tool.query)")
        XCTAssertEqual(toolID?["user_unit"] as? Bool, true, "\(tool.query)")
        XCTAssertEqual(toolID?["uid"] as? Int, Self.allowed, "\(tool.query)")
        XCTAssertEqual(tool.query["enforced"] as? Bool, true, "run started the command once the rules named its scope: \(tool.query)")
        let toolProbe = try tool.probe
        XCTAssertTrue(toolProbe.refused, "4010 in tool's scope, out of wwan0: \(toolProbe)\n\(tool.output)")
        let outsideAllowed = try Probe(outside(sd, Self.allowed, Self.probe))
        XCTAssertTrue(outsideAllowed.passed, "4010 outside tool's scope: \(outsideAllowed)")
        // Through the user bus when only DBUS_SESSION_BUS_ADDRESS is set (no private socket to try): the same scope.
        let viaBus = try sd.check(sd.asUser(Self.allowed, ["netpermctl", "run", "--app", "tool", "--", "grep", "^0::/",
                                                           "/proc/self/cgroup"],
                                            environment: ["PATH=/usr/local/bin:/usr/bin:/bin",
                                                          "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/4010/bus"]))
        XCTAssertTrue(viaBus.stdout.hasPrefix("0::/user.slice/user-4010.slice/user@4010.service/app.slice/app-netpermd-tool-"),
                      viaBus.summary)

        // 4011 may not use WWAN; app wide may. Its scope is in the rules (Ethernet=deny) but has no WWAN element,
        // and its uid's deny still refuses it.
        let wide = try runInScope(sd, uid: Self.denied, app: "wide") { cgroup in
            let table = try sd.check(["nft", "list", "table", "inet", "netpermd"]).stdout
            return (Self.elements(of: "user5_ethernet", in: table).contains("\"\(cgroup)\" : goto deny"), table)
        }
        XCTAssertEqual(wide.cgroup, "user.slice/user-4011.slice/user@4011.service/app.slice/\(wide.unit)", wide.output)
        XCTAssertEqual(wide.query["app"] as? String, "wide", "\(wide.query)")
        XCTAssertEqual(wide.query["enforced"] as? Bool, true, "\(wide.query)")
        XCTAssertEqual((wide.query["permissions"] as? [String: Any])?["wwan"] as? String, "allow",
                       "the verdict says what the app may do: \(wide.query)")
        XCTAssertFalse(wide.seen.contains(wide.unit + "\" : accept"), "a user unit never accepts:\n\(wide.seen)")
        XCTAssertFalse(Self.elements(of: "user5_wwan", in: wide.seen).contains(wide.unit), wide.seen)
        let wideProbe = try wide.probe
        XCTAssertTrue(wideProbe.refused, "4011 in wide's scope, out of wwan0: \(wideProbe)\n\(wide.output)")
        let outsideDenied = try Probe(outside(sd, Self.denied, Self.probe))
        XCTAssertTrue(outsideDenied.refused, "4011 outside wide's scope: \(outsideDenied)")

        // What a user meets when the manager cannot be reached: exit 5, nothing run, and why.
        func refused(_ uid: Int, environment: [String]? = nil) throws -> CommandResult {
            let marker = "/tmp/npt-ran-\(uid)"
            let r = try sd.run(sd.asUser(uid, ["netpermctl", "run", "--app", "tool", "--", "touch", marker],
                                         environment: environment))
            XCTAssertEqual(r.status, 5, r.summary)
            XCTAssertEqual(r.stdout, "", r.summary)
            XCTAssertFalse(sd.exists(marker), "COMMAND ran: \(r.summary)")
            XCTAssertTrue(r.stderr.hasPrefix("netpermctl: cannot start the scope app-netpermd-tool-"), r.summary)
            return r
        }
        // Another user's XDG_RUNTIME_DIR, as `su` or `sudo` keep it.
        let foreign = try refused(Self.denied, environment: ["PATH=/usr/local/bin:/usr/bin:/bin",
                                                              "XDG_RUNTIME_DIR=/run/user/\(Self.allowed)"])
        XCTAssertTrue(foreign.stderr.hasSuffix("no user service manager reachable: XDG_RUNTIME_DIR is /run/user/4010, "
            + "which belongs to uid 4010, not to you (uid 4011); was it kept from another user's session (su, sudo)? "
            + "Yours is /run/user/4011\n"), foreign.summary)
        // The manager stopped: its runtime directory goes with it (user-runtime-dir@.service has StopWhenUnneeded=),
        // as at a last logout.
        try sd.check(["systemctl", "stop", "user@\(Self.denied).service"])
        try waitUntil("/run/user/4011 is gone", timeout: 10, interval: 0.05) {
            (!sd.exists("/run/user/4011"), try sd.property("user-runtime-dir@4011.service", "ActiveState"))
        }
        let loggedOut = try refused(Self.denied)
        XCTAssertTrue(loggedOut.stderr.hasSuffix("no user service manager reachable: XDG_RUNTIME_DIR is /run/user/4011: "
            + "No such file or directory; is your user manager (user@4011.service) running? It runs while you are "
            + "logged in, and always after `loginctl enable-linger`\n"), loggedOut.summary)
    }

    /// Mode=steer: a user's scope is marked as a user unit, with what its app and its uid both allow (docs/
    /// ENFORCEMENT.md, "Steer"), and its socket leaves by the link that mark's table routes to, with its address.
    func testRunAsAUserIsSteeredByWhatItsAppAndItsUidBothAllow() throws {
        let sd = try bootRealSystemd(policy: Self.policy.replacingOccurrences(of: "Mode=block", with: "Mode=steer"),
                                     defaultRoutes: [("wwan0", 100), ("wlan0", 600)])
        try startEnforcing(sd, dropIn: "netpermd-steer.conf")
        try startUsers(sd)
        let markProbe = """
            import socket
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.connect(("192.0.2.1", 9))
            print("mark", hex(u.getsockopt(socket.SOL_SOCKET, 36)), u.getsockname()[0])
            """
        func markedUnits() throws -> (Int, String) {
            let status = try JSONValue.object(sd.check(["/usr/local/bin/netpermctl", "--json", "status"]).lines.last ?? "")
            let steering = (status["enforcement"] as? [String: Any])?["steering"] as? [String: Any]
            return (steering?["marked_unit_cgroups"] as? Int ?? -1, "\(steering ?? [:])")
        }
        func mark(_ lines: [String]) -> String? { lines.first { $0.hasPrefix("mark ") } }
        XCTAssertEqual(try markedUnits().0, 0, "no unit cgroup is marked before the scopes")

        // 4010 may use everything (its uid is not marked); tool everything but WWAN: wifi, ethernet, other, metered.
        let tool = try runInScope(sd, uid: Self.allowed, app: "tool", probe: markProbe) { _ in
            let (n, seen) = try markedUnits()
            return (n == 1, seen)
        }
        XCTAssertEqual(tool.cgroup, "user.slice/user-4010.slice/user@4010.service/app.slice/\(tool.unit)", tool.output)
        XCTAssertEqual(mark(tool.lines), "mark 0x6e70001d 10.1.0.1", "out of wlan0, with its address: \(tool.output)")
        XCTAssertEqual(mark(try outside(sd, Self.allowed, markProbe)),
                       "mark 0x0 10.2.0.1", "4010 outside: unmarked, out of wwan0 (the main table)")
        try waitUntil("tool's scope is gone from the marks", timeout: 10, interval: 0.02) {
            let (n, seen) = try markedUnits()
            return (n == 0, seen)
        }

        // 4011 may use everything but WWAN; wide everything but Ethernet: its scope gets what both allow, wifi,
        // other and metered (0x19), not its app's WWAN.
        let wide = try runInScope(sd, uid: Self.denied, app: "wide", probe: markProbe) { _ in
            let (n, seen) = try markedUnits()
            return (n == 1, seen)
        }
        XCTAssertEqual(mark(wide.lines), "mark 0x6e700019 10.1.0.1", wide.output)
        XCTAssertEqual(mark(try outside(sd, Self.denied, markProbe)),
                       "mark 0x6e70001d 10.1.0.1", "4011 outside: its uid's own mark")
    }

    /// `probe` (Python) as `uid` outside any `netpermctl run` scope, where a user's programs run: in a scope of
    /// their own manager that no app names (`systemd-run --user --scope`), so only the uid's app applies. (Not in
    /// the test's own cgroup: that is outside the container's hierarchy, which steering's program never sees.)
    private func outside(_ sd: RealSystemd, _ uid: Int, _ probe: String) throws -> [String] {
        try sd.check(sd.asUser(uid, ["systemd-run", "--user", "--scope", "--quiet", "python3", "-c", probe])).lines
    }

    /// useradd npt-allowed (4010) and npt-denied (4011) and start their user managers; stopped at teardown.
    private func startUsers(_ sd: RealSystemd) throws {
        for (name, uid) in [("npt-allowed", Self.allowed), ("npt-denied", Self.denied)] {
            try sd.addUser(name, uid: uid)
            // Teardown blocks run last-added first: the managers stop before the container goes.
            addTeardownBlock { sd.stopUserManager(uid: uid) }
            try sd.startUserManager(uid: uid)
            XCTAssertEqual(try sd.property("user@\(uid).service", "ActiveState"), "active")
            XCTAssertEqual(try sd.property("user@\(uid).service", "ControlGroup"),
                           "/user.slice/user-\(uid).slice/user@\(uid).service")
        }
    }

    /// Runs `netpermctl run --app APP` as `uid`, held at its start until `ready(cgroup)` (HeldScope).
    private func runInScope(_ sd: RealSystemd, uid: Int, app: String, probe: String = RealSystemdUserRunTests.probe,
                            ready: (_ cgroup: String) throws -> (Bool, String)) throws -> InScope {
        try HeldScope.run(self, sd, what: "\(app)'s scope", probe: probe, launch: { script, probe in
            sd.asUser(uid, ["netpermctl", "run", "--app", app, "--", "sh", "-c", script, probe])
        }, ready: ready)
    }

    /// The elements of map `name` as `nft list table` prints them ("" when it has none).
    static func elements(of name: String, in table: String) -> String {
        guard let start = table.range(of: "map \(name) {") else { return "" }
        let rest = table[start.upperBound...]
        return String(rest[..<(rest.range(of: "}")?.lowerBound ?? rest.endIndex)])
    }
}
