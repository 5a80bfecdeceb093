// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A daemon that cannot load its rules (Mode=block without CAP_NET_ADMIN: run as nobody), as an admin sees it
/// (issue 23): `netpermctl status` says enforcement failed and why, not only STATUS's JSON; `query` says the app is
/// not enforced and why; and libnftables' own message reaches the log as a line with a priority like every other.
final class EnforcementFailureTests: IntegrationTestCase {
    func testAFailedEnforcementIsShownAndLogged() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        guard chmod(dir, 0o777) == 0 else { throw HarnessError("chmod \(dir): \(String(cString: strerror(errno)))") }
        let config = try writeConfig("[Enforcement]\nMode=block\n\n[App maps]\nUser=nobody\nWWAN=deny\n", in: dir)
        let d = try startDaemon(in: ns, socket: dir + "/netpermd.sock", config: config, wrapper: Self.asNobody)
        var e: [String: Any] = [:]
        try waitUntil("enforcement failed") {
            e = try self.request(d.socketPath, "STATUS")["enforcement"] as? [String: Any] ?? [:]
            return (e["state"] as? String == "failed", "\(e)")
        }
        let error = try XCTUnwrap(e["error"] as? String, "\(e)")
        XCTAssertTrue(error.contains("Operation not permitted"), error)

        let human = try ctl(["--socket", d.socketPath, "status"])
        XCTAssertEqual(human.status, 0, human.summary)
        let line = try XCTUnwrap(human.lines.first { $0.hasPrefix("enforcement: ") }, human.stdout)
        XCTAssertNotNil(line.range(of: #"^enforcement: block, failed after [0-9]+ attempts?: "#, options: .regularExpression),
                        line)
        XCTAssertTrue(line.hasSuffix(": " + error), line)
        let terse = try ctl(["--socket", d.socketPath, "-t", "status"])
        for field in ["enforcement-mode:block", "enforcement-state:failed",
                      "enforcement-error:" + error.replacingOccurrences(of: ":", with: "\\:")] {
            XCTAssertTrue(terse.lines.contains(field), "\(field) in:\n\(terse.stdout)")
        }
        let query = try ctl(["--socket", d.socketPath, "query", "maps"])
        XCTAssertTrue(query.lines.contains("enforced:     no (rules-failed)"), query.stdout)

        // Every line of the log has a priority; libnftables' own is one of them, at err.
        let log = d.log.split(separator: "\n")
        XCTAssertFalse(log.isEmpty)
        for l in log {
            XCTAssertNotNil(l.range(of: #"^<[0-7]>"#, options: .regularExpression), "a line without a priority: \(l)")
        }
        XCTAssertTrue(log.contains("<3>library: Operation not permitted (you must be root)"),
                      d.logTail)
    }
}
