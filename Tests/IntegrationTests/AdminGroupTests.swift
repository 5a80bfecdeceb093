// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Defect 6 of issue 14: the supplementary groups were read from /proc/PID/status, whose line is `Groups:\t1 100`,
/// and split on spaces only: the token `\t1` did not parse, so a member whose first (and lowest) supplementary group
/// is the AdminGroup= group was refused. The daemon now asks the kernel (SO_PEERGROUPS).
final class AdminGroupTests: IntegrationTestCase {
    func testAMemberWhoseFirstSupplementaryGroupIsTheAdminGroupIsPrivileged() throws {
        // gid 1 (daemon on Debian): lower than any other group a caller has, so it comes first.
        guard let group = getgrgid(1) else { throw XCTSkip("no group with gid 1 on this machine") }
        let admin = String(cString: group.pointee.gr_name)
        let f = try makeAppFixture(policy: "[Defaults]\nAdminGroup=\(admin)\n\n[App otherapp]\nExecutable=/nonexistent/otherapp\n")
        /// nobody (uid and primary gid 65534) with the supplementary `groups`.
        func asNobody(groups: String, _ argv: [String], input: String = "") throws -> CommandResult {
            try Subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--groups=\(groups)"] + argv,
                               input: Array(input.utf8))
        }

        // What the old parser read: the admin group is the first token, right after the tab.
        let status = try asNobody(groups: "1,100", ["cat", "/proc/self/status"])
        XCTAssertTrue(status.stdout.contains("\nGroups:\t1 100 \n") || status.stdout.contains("\nGroups:\t1 100\n"),
                      status.summary)

        // (PROMPTS, DECIDE and FORGET are anyone's for their own processes: UserDecisions=yes.)
        let requests = "QUERY otherapp\nMETRICS\nRELOAD\n"
        for groups in ["1,100", "1"] {
            let r = try asNobody(groups: groups, ["socat", "-", "UNIX-CONNECT:\(f.socket)"], input: requests)
            XCTAssertEqual(r.lines.count, 3, r.summary)
            for line in r.lines {
                XCTAssertEqual(try JSONValue.bool(try JSONValue.object(line), "ok"), true,
                               "groups \(groups) include \(admin): \(line)")
            }
            XCTAssertEqual(try JSONValue.object(r.lines.first ?? "{}")["app"] as? String, "otherapp", r.summary)
            // netpermctl as such a member, too.
            let ctl = try asNobody(groups: groups, [netpermctl, "--socket", f.socket, "reload"])
            XCTAssertEqual(ctl.status, 0, ctl.summary)
        }

        // The same caller without the group, and with only groups around it: refused.
        for groups in ["100", "2,100"] {
            let r = try asNobody(groups: groups, ["socat", "-", "UNIX-CONNECT:\(f.socket)"], input: requests)
            XCTAssertEqual(r.lines.count, 3, r.summary)
            for line in r.lines {
                XCTAssertEqual(try JSONValue.object(line)["error"] as? String, "permission-denied",
                               "groups \(groups) do not include \(admin): \(line)")
            }
        }
    }
}
