// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `netpermctl check` as admins use it (issue 23): from a pipe, like `nginx -t` or `visudo -c -f -`; agreeing with
/// the daemon about a missing default file; and its findings for scripts, with -t and --json.
final class CheckInputTests: IntegrationTestCase {
    static let policy = IntegrationTestCase.standardConfig + "\n[App maps]\nExecutable=/usr/bin/maps\nWWLAN=deny\n"

    /// `-`, /dev/stdin on a pipe, and a process substitution: each read to its end, as a file would be.
    func testCheckReadsAPipe() throws {
        let dir = try makeTempDir()
        let file = dir + "/p.conf"
        try Self.policy.write(toFile: file, atomically: true, encoding: .utf8)
        let warning = "warning: [App maps]: unknown key 'WWLAN' (did you mean WWAN=?); ignored\n"
        for (shown, command) in [("<stdin>", "cat '\(file)' | '\(netpermctl)' check -"),
                                 ("/dev/stdin", "cat '\(file)' | '\(netpermctl)' check /dev/stdin"),
                                 ("/dev/fd/", "'\(netpermctl)' check <(cat '\(file)')")] {
            let r = try Subprocess.run(["bash", "-c", command])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertTrue(r.stdout.hasPrefix(shown) && r.stdout.hasSuffix(": ok (1 file, 1 app, 2 interface overrides, "
                + "1 warning)\n"), r.summary)
            XCTAssertTrue(r.stderr.hasPrefix(shown) && r.stderr.hasSuffix(":9: " + warning), r.summary)
        }
        // A broken one from a pipe fails as a file does.
        let broken = try Subprocess.run([netpermctl, "check", "-"], input: Array("[App x]\nUser=1\nWiFi=maybe\n".utf8))
        XCTAssertEqual(broken.status, 1, broken.summary)
        XCTAssertEqual(broken.stderr, "<stdin>:3: [App x]: bad value 'maybe' for WiFi= (expected allow, deny or ask)\n"
            + "<stdin>: invalid (1 error)\n", broken.summary)
    }

    /// Still bounded: more than the daemon would read of a file (16 MiB) is refused, not read on and on.
    func testAPipeIsBounded() throws {
        let r = try Subprocess.run(["bash", "-c", "head -c 17000000 /dev/zero | '\(netpermctl)' check -"], timeout: 30)
        XCTAssertEqual(r.status, 1, r.summary)
        XCTAssertEqual(r.stderr, "<stdin>: cannot read: larger than 16 MiB\n<stdin>: invalid (1 error)\n", r.summary)
        // A directory is still no policy.
        let dir = try ctl(["check", "/tmp"])
        XCTAssertEqual(dir.status, 1, dir.summary)
        XCTAssertEqual(dir.stderr, "/tmp: cannot read: not a regular file\n/tmp: invalid (1 error)\n", dir.summary)
    }

    /// -t: one line per finding, file:line:section:severity:message; --json: one object, the findings as RELOAD
    /// and STATUS list them.
    func testFindingsForScripts() throws {
        let dir = try makeTempDir()
        let file = dir + "/p.conf"
        try (Self.policy + "[App x]\nUser=1\nWiFi=maybe\n").write(toFile: file, atomically: true, encoding: .utf8)
        let terse = try ctl(["-t", "check", file])
        XCTAssertEqual(terse.status, 1, terse.summary)
        XCTAssertEqual(terse.stderr, "", terse.summary)
        let escaped = file.replacingOccurrences(of: ":", with: "\\:")
        XCTAssertEqual(terse.lines, [
            "\(escaped):9:[App maps]:warning:unknown key 'WWLAN' (did you mean WWAN=?); ignored",
            "\(escaped):12:[App x]:error:bad value 'maybe' for WiFi= (expected allow, deny or ask)",
        ], terse.summary)

        for flag in ["--json", "-j"] {
            let json = try ctl([flag, "check", file])
            XCTAssertEqual(json.status, 1, json.summary)
            XCTAssertEqual(json.lines.count, 1, json.summary)
            let o = try JSONValue.object(json.lines.first ?? "")
            XCTAssertEqual(o["ok"] as? Bool, false, json.stdout)
            XCTAssertEqual(o["files"] as? [String], [file], json.stdout)
            XCTAssertEqual(o["errors"] as? Int, 1, json.stdout)
            XCTAssertEqual(o["warnings"] as? Int, 1, json.stdout)
            let findings = try XCTUnwrap(o["findings"] as? [[String: Any]], json.stdout)
            XCTAssertEqual(findings.count, 2, json.stdout)
            XCTAssertEqual(findings.first?["file"] as? String, file)
            XCTAssertEqual(findings.first?["line"] as? Int, 9)
            XCTAssertEqual(findings.first?["section"] as? String, "[App maps]")
            XCTAssertEqual(findings.first?["severity"] as? String, "warning")
            XCTAssertEqual(findings.first?["message"] as? String, "unknown key 'WWLAN' (did you mean WWAN=?); ignored")
            XCTAssertEqual(findings.last?["severity"] as? String, "error")
        }
        // A file that cannot be read: one finding with no line or section.
        let missing = try ctl(["--json", "check", dir + "/missing.conf"])
        XCTAssertEqual(missing.status, 1, missing.summary)
        let o = try JSONValue.object(missing.lines.first ?? "")
        let f = try XCTUnwrap((o["findings"] as? [[String: Any]])?.first, missing.stdout)
        XCTAssertTrue(f["line"] is NSNull && f["section"] is NSNull, missing.stdout)
        XCTAssertEqual(f["message"] as? String, "cannot read: No such file or directory", missing.stdout)
    }

    /// With no /etc/netpermd/netpermd.conf the daemon starts on its built-in defaults, and `check` (no PATH) says
    /// the same, so the man page's `netpermctl check && netpermctl reload` works on such a machine. A PATH given
    /// must exist, as `netpermd --config PATH` must.
    func testAMissingDefaultFileIsTheDaemonsDefaults() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let sandbox = try DefaultsSandbox(namespace: ns, scratch: dir + "/sandbox")
        addTeardownBlock { sandbox.close() }
        _ = try Subprocess.run(sandbox.argv(["rm", "-f", "/etc/netpermd/netpermd.conf"]))
        _ = try sandbox.startDaemon(self, log: dir + "/netpermd.log")
        let check = try Subprocess.run(sandbox.argv([netpermctl, "check"]))
        XCTAssertEqual(check.status, 0, check.summary)
        XCTAssertEqual(check.stdout, "/etc/netpermd/netpermd.conf: ok (no such file, so netpermd starts on its built-in "
            + "defaults; 0 files, 0 apps, 0 interface overrides)\n", check.summary)
        let json = try Subprocess.run(sandbox.argv([netpermctl, "--json", "check"]))
        XCTAssertEqual(json.status, 0, json.summary)
        XCTAssertEqual(try JSONValue.object(json.lines.first ?? "")["defaults"] as? Bool, true, json.stdout)
        let both = try Subprocess.run(sandbox.argv(["sh", "-c", "\(netpermctl) check && \(netpermctl) reload"]))
        XCTAssertEqual(both.status, 0, both.summary)
        XCTAssertTrue(both.stdout.hasSuffix("policy reloaded: generation 2, 0 apps\n"), both.summary)
        let named = try Subprocess.run(sandbox.argv([netpermctl, "check", "/etc/netpermd/netpermd.conf"]))
        XCTAssertEqual(named.status, 1, named.summary)
        XCTAssertEqual(named.stderr, "/etc/netpermd/netpermd.conf: cannot read: No such file or directory\n"
            + "/etc/netpermd/netpermd.conf: invalid (1 error)\n", named.summary)
    }
}
