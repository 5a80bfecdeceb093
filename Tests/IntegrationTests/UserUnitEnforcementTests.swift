// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `UserUnit=` apps in the kernel, without a user manager: the test makes a user manager's cgroup tree itself
/// (`npt-user-PID.slice/user-UID.slice/user@UID.service/app.slice/X.scope`, a top-level slice of its own so that
/// nothing of the host's `user.slice` is touched, removed at teardown) after the daemon started, moves clients into
/// it, and checks what connect() and sendto() see. A user's unit only narrows what its uid may do: its allow is
/// no escape from its uid's deny.
final class UserUnitEnforcementTests: IntegrationTestCase {
    private var bed: EnforcementBed!
    private var dir = ""
    private var socket: String { dir + "/netpermd.sock" }
    /// Made by the test, deepest last; removed deepest first.
    private var made: [String] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        try EnforcementBed.requireTools()
        bed = try EnforcementBed(self)
        dir = try makeTempDir()
        showOnFailure("nft list ruleset") { (try? self.bed.nft("list", "ruleset").stdout) ?? "(nft failed)" }
        addTeardownBlock { [unowned self] in EnforcementBed.removeCgroups(self.made.map { Array($0.utf8CString) }) }
    }

    private func mkdirs(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 else { throw HarnessError("mkdir \(path): \(String(cString: strerror(errno)))") }
        made.append(path)
    }

    private func query(_ app: String) throws -> [String: Any] { try request(socket, "QUERY \(app)") }

    func testUserUnitsAreFollowedAndOnlyNarrow() throws {
        let root = try EnforcementBed.cgroupRoot()
        let top = root + "/npt-user-\(getpid()).slice"
        let tag = "\(getpid())"
        try bed.addLink("wwan0", subnet: 71)
        try bed.addLink("eth0", subnet: 72)
        let policy = EnforcementTests.policy + """
            [App escape]
            UserUnit=npt-escape-*.scope
            WWAN=allow

            [App narrow]
            UserUnit=npt-narrow-*.scope
            WWAN=deny

            [App nested]
            UserUnit=npt-nested-*.scope
            WWAN=allow
            Ethernet=deny

            """
        let config = try writeConfig(policy, in: dir)
        _ = try startDaemon(in: bed.ns, socket: socket, config: config, nsenter: true)
        try waitUntil("the rules are in force") {
            let e = try self.request(self.socket, "STATUS")["enforcement"] as? [String: Any]
            return (e?["state"] as? String == "enforcing", "\(e ?? [:])")
        }
        try waitUntil("the peers answer") {
            let p = try self.bed.probe(link: "wwan0"), q = try self.bed.probe(link: "eth0")
            return (p.passed && q.passed, "\(p) \(q)")
        }
        XCTAssertEqual(try query("narrow")["enforced_why"] as? String, "cgroup-absent", "no such unit yet")

        // A user manager appears after the daemon started (as user@UID.service does at a first login), with units
        // in app.slice (level 5) and one slice deeper (level 6).
        var apps: [String: String] = [:]
        for uid in [4001, 4002, 4004] {
            let manager = top + "/user-\(uid).slice/user@\(uid).service"
            if made.isEmpty { try mkdirs(top) }
            try mkdirs(top + "/user-\(uid).slice")
            try mkdirs(manager)
            try mkdirs(manager + "/app.slice")
            for app in ["escape", "narrow"] {
                let unit = manager + "/app.slice/npt-\(app)-\(tag).scope"
                try mkdirs(unit)
                apps["\(app)\(uid)"] = unit
            }
            try mkdirs(manager + "/app.slice/app-npt.slice")
            let nested = manager + "/app.slice/app-npt.slice/npt-nested-\(tag).scope"
            try mkdirs(nested)
            apps["nested\(uid)"] = nested
        }
        for app in ["escape", "narrow", "nested"] {
            try waitUntil("\(app) is enforced") {
                let q = try self.query(app)
                return (q["enforced"] as? Bool == true, "\(q["enforced_why"] ?? "")")
            }
        }
        let table = try XCTUnwrap(try bed.table())
        XCTAssertTrue(table.contains("socket cgroupv2 level 5 vmap @user5_wwan"), table)

        // 4001 is [App denied] (WWAN=deny): a unit of its own that allows WWAN is no way out.
        for family in ["4", "6"] {
            assertBlocked(try bed.probe(uid: 4001, cgroup: apps["escape4001"], link: "wwan0", family: family),
                          "uid 4001 (WWAN=deny) in a user unit whose app allows WWAN, IPv\(family)")
        }
        assertBlocked(try bed.probe(uid: 4001, link: "wwan0"), "uid 4001 outside any unit")
        // 4002 is [App allowed]: a user unit whose app denies narrows it.
        assertBlocked(try bed.probe(uid: 4002, cgroup: apps["narrow4002"], link: "wwan0"), "uid 4002 in a denying user unit")
        XCTAssertTrue(try bed.probe(uid: 4002, cgroup: apps["escape4002"], link: "wwan0").passed, "uid 4002 in an allowing one")
        XCTAssertTrue(try bed.probe(uid: 4002, link: "wwan0").passed, "uid 4002 outside")
        // 4004 is in no [App]: its units' apps decide, at level 6 too.
        assertBlocked(try bed.probe(uid: 4004, cgroup: apps["narrow4004"], link: "wwan0"), "uid 4004 in narrow")
        assertBlocked(try bed.probe(uid: 4004, cgroup: apps["nested4004"], link: "eth0", family: "6"),
                      "uid 4004 in a unit one slice deeper (level 6), Ethernet=deny")
        XCTAssertTrue(try bed.probe(uid: 4004, cgroup: apps["nested4004"], link: "wwan0").passed, "the nested unit's WWAN")
        XCTAssertTrue(try bed.probe(uid: 4004, cgroup: apps["escape4004"], link: "wwan0").passed, "uid 4004 in escape")

        // The user manager goes (logout): its units are no longer named, and the rules load again without them.
        for d in made.reversed() where d.hasPrefix(top + "/user-4004.slice") {
            try waitUntil("\(d) removed") { (rmdir(d) == 0 || errno == ENOENT, String(cString: strerror(errno))) }
        }
        try waitUntil("uid 4004's units are gone from the rules") {
            let t = try self.bed.table() ?? ""
            return (!t.contains("user-4004.slice") && t.contains("user-4002.slice"), t)
        }
    }
}
