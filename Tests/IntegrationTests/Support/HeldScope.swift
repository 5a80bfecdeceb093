// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A command in a scope of a user's own manager, held at its start: `launch` (argv of a scope-making command that
/// runs `sh -c SCRIPT PROBE`, e.g. `netpermctl run --app A --` or `systemd-run --user --scope --unit=U`) is given
/// the script, which prints its cgroup and the daemon's QUERY reply from inside, then waits for a line on its stdin
/// before running PROBE (Python). The rules follow a new cgroup a moment after it appears (docs/ENFORCEMENT.md, "The
/// first moments"), and a user cannot list them, so the test sends the line once `ready(cgroup)` says the daemon has
/// put the scope in the kernel. Every wait is bounded.
struct HeldScope {
    var output: String
    /// Its cgroup as /proc/self/cgroup says it, without the leading "0::/".
    var cgroup: String
    var unit: String { String(cgroup.split(separator: "/").last ?? "") }
    var query: [String: Any]
    /// The command's output after the test's go.
    var lines: [String]
    /// What `ready` saw when it let the command go.
    var seen: String
    /// What RealSystemdUserRunTests.Probe read from the command's lines (the wwan probe's).
    var probe: RealSystemdUserRunTests.Probe { get throws { try RealSystemdUserRunTests.Probe(lines) } }

    static let script = #"""
        grep '^0::/' /proc/self/cgroup
        netpermctl --json query
        read go
        exec python3 -c "$0"
        """#

    static func run(_ test: IntegrationTestCase, _ sd: RealSystemd, what: String, probe: String,
                    launch: (_ script: String, _ probe: String) -> [String],
                    ready: (_ cgroup: String) throws -> (Bool, String)) throws -> HeldScope {
        let dir = try test.makeTempDir()
        let out = dir + "/out", err = dir + "/err"
        let argv = ["nsenter", "-t", String(sd.pid1), "-a"] + launch(script, probe)
        let (r, w) = try Subprocess.makePipe()
        var writer: Int32? = w
        let child: ChildProcess
        do {
            child = try Subprocess.spawn(argv, stdin: .fd(r), stdout: .appendFile(out), stderr: .appendFile(err))
        } catch {
            close(r); close(w)
            throw error
        }
        close(r)
        // An early return closes the pipe (the command's `read` ends) and reaps the child, killing it if need be.
        defer {
            if let fd = writer { close(fd) }
            child.killAndReap()
        }
        func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        func lines() -> [String] { text(out).split(separator: "\n").map(String.init) }
        var cgroup = ""
        try test.waitUntil("the command in \(what) has asked the daemon", timeout: 20, interval: 0.02) {
            if let status = child.poll() {
                throw HarnessError("\(what) exited \(status) early\n--- stdout ---\n\(text(out))--- stderr ---\n\(text(err))")
            }
            let l = lines()
            cgroup = l.first { $0.hasPrefix("0::/") }.map { String($0.dropFirst(4)) } ?? ""
            return (!cgroup.isEmpty && l.contains { $0.hasPrefix("{") }, text(out) + text(err))
        }
        var seen = ""
        try test.waitUntil("the daemon has put \(cgroup) in the kernel", timeout: 10, interval: 0.02) {
            let (ok, state) = try ready(cgroup)
            seen = state
            return (ok, state)
        }
        guard write(w, "go\n", 3) == 3 else { throw HarnessError("write to the command: \(String(cString: strerror(errno)))") }
        close(w)
        writer = nil
        guard let status = child.wait(timeout: 15) else { throw HarnessError("the command did not end within 15 s: \(text(out))") }
        let output = text(out) + text(err)
        XCTAssertEqual(status, 0, output)
        let l = lines()
        let query = try JSONValue.object(try XCTUnwrap(l.first { $0.hasPrefix("{") }, output))
        return HeldScope(output: output, cgroup: cgroup, query: query, lines: l, seen: seen)
    }
}
