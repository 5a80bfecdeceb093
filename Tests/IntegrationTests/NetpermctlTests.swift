// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// netpermctl as a user runs it: exit codes, human output, --json.
final class NetpermctlTests: IntegrationTestCase {
    func testExitsThreeWhenNoDaemonRuns() throws {
        let dir = try makeTempDir()
        let missing = "\(dir)/missing.sock"
        for args in [["status"], ["links"], ["ping"], ["--json", "status"], ["agent"]] {
            let r = try ctl(["--socket", missing] + args)
            XCTAssertEqual(r.status, 3, "netpermctl \(args) without a daemon: \(r.summary)")
            XCTAssertEqual(r.stdout, "", "nothing on stdout: \(r.summary)")
            XCTAssertEqual(r.stderr, "netpermctl: cannot reach netpermd at \(missing): No such file or directory "
                + "(is the daemon running?)\n", r.summary)
        }
        // wait keeps trying within its time-out, then says why it gave up.
        let wait = try ctl(["--socket", missing, "wait", "--timeout", "0.2"])
        XCTAssertEqual(wait.status, 3, wait.summary)
        XCTAssertEqual(wait.stderr, "netpermctl: cannot reach netpermd at \(missing): No such file or directory "
            + "(is the daemon running?); gave up at the time-out\n", wait.summary)
        // monitor waits for the daemon to appear, and says so once.
        let monitor = try EvPipedCommand([netpermctl, "--socket", missing, "monitor"], stderrPath: "\(dir)/monitor.err",
                                         name: "monitor")
        addTeardownBlock { monitor.stop() }
        try waitUntil("monitor says it waits for the daemon") {
            (monitor.stderr.contains("\n"), monitor.stderr)
        }
        XCTAssertEqual(monitor.stderr, "netpermctl: cannot reach netpermd at \(missing): No such file or directory "
            + "(is the daemon running?); waiting for it\n")
        XCTAssertTrue(monitor.process.isRunning, "monitor keeps waiting: \(monitor.stderr)")

        // A socket file with nobody behind it is no better.
        let stalePath = "\(dir)/stale.sock"
        let stale = try BoundUnlistenedSocket(path: stalePath)
        addTeardownBlock { stale.close() }
        let r = try ctl(["--socket", stalePath, "status"])
        XCTAssertEqual(r.status, 3, r.summary)
        XCTAssertEqual(r.stderr, "netpermctl: cannot reach netpermd at \(stalePath): Connection refused "
            + "(is the daemon running?)\n", r.summary)
    }

    /// A daemon that is running but out of this user's reach is not "not running": the message says what is
    /// in the way, and nothing waits for it to change.
    func testPermissionDeniedSaysSo() throws {
        let f = try makeFixture()
        var mode = stat()
        XCTAssertEqual(stat(f.dir, &mode), 0)
        XCTAssertEqual(mode.st_mode & 0o777, 0o700, "the fixture's socket directory is root's alone")
        let expected = "netpermctl: cannot reach netpermd at \(f.socket): Permission denied (the socket's permissions "
            + "or directory do not let this user in)\n"
        for args in [["status"], ["--json", "links"], ["agent"], ["monitor"], ["wait", "--timeout", "30"]] {
            let started = monotonicNow()
            let r = try Subprocess.run(Self.asNobody + [netpermctl, "--socket", f.socket] + args, timeout: 10)
            XCTAssertEqual(r.status, 3, "netpermctl \(args) as nobody: \(r.summary)")
            XCTAssertEqual(r.stderr, expected, "netpermctl \(args) as nobody: \(r.summary)")
            XCTAssertEqual(r.stdout, "", r.summary)
            XCTAssertLessThan(monotonicNow() - started, 5, "netpermctl \(args) gives up at once: \(r.summary)")
        }
    }

    func testStatusHumanOutput() throws {
        let f = try makeFixture()
        let s = try status(f.socket)
        let before = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(before.status, 0, before.summary)
        XCTAssertEqual(before.stderr, "")
        // Issue 23: the agents and enforcement were only in the JSON.
        XCTAssertEqual(before.lines, ["version:   \(s.version)", "ready:     yes", "links:     \(s.links)",
                                      "network:   unavailable", "primary:   -", "agents:    0",
                                      "policy:    generation 1, 0 apps", "enforcement: off", "usage:     off"],
                       before.stdout)

        try f.ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try f.ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0", "metric", "200")
        try waitForStatus(f.socket, "wwan0 is primary") { $0.primary == "wwan0" }
        let after = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(after.status, 0, after.summary)
        for line in ["network:   available", "primary:   wwan0 (wwan)"] {
            XCTAssertTrue(after.lines.contains(line), "expected the line '\(line)' in:\n\(after.stdout)")
        }

        // A broken policy: the reload fails, the old policy stays, and status says both.
        try (Self.standardConfig + "\n[App updater]\nExecutable=/nonexistent/updater\nWWAN=sometimes\n")
            .write(toFile: f.config, atomically: true, encoding: .utf8)
        let reload = try ctl(["--socket", f.socket, "reload"])
        XCTAssertEqual(reload.status, 1, reload.summary)
        let error = try XCTUnwrap(try policyStatus(f.socket).error, "STATUS reports the failed reload")
        XCTAssertTrue(error.hasPrefix("\(f.config):"), error)
        let broken = try ctl(["--socket", f.socket, "status"])
        XCTAssertEqual(broken.status, 0, broken.summary)
        XCTAssertEqual(Array(broken.lines.suffix(4)), ["policy:    generation 1, 0 apps", "policy error: \(error)",
                                                       "enforcement: off", "usage:     off"], broken.stdout)

        // Fixed, with a typo: a new generation with its app, the error gone, and the warning counted and shown.
        try (Self.standardConfig + "\n[App updater]\nExecutable=/nonexistent/updater\nWWAN=deny\nWLAN=deny\n")
            .write(toFile: f.config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try ctl(["--socket", f.socket, "reload"]).status, 0)
        let fixed = try ctl(["--socket", f.socket, "status"])
        // inotify may have loaded the file as well as the reload: generation 2 or more.
        let policyLine = try XCTUnwrap(fixed.lines.first { $0.hasPrefix("policy:") }, fixed.stdout)
        let generation = policyLine.dropFirst("policy:    generation ".count).prefix { $0.isNumber }
        XCTAssertTrue(policyLine.hasPrefix("policy:    generation ") && policyLine.hasSuffix(", 1 app, 1 warning")
                      && (Int(generation) ?? 0) >= 2, fixed.stdout)
        XCTAssertTrue(fixed.lines.contains("policy warning: \(f.config):10: [App updater]: unknown key 'WLAN' "
                                           + "(did you mean WWAN=?); ignored"), fixed.stdout)
        XCTAssertFalse(fixed.stdout.contains("policy error"), fixed.stdout)
    }

    func testLinksHumanOutputShowsEveryLink() throws {
        let f = try makeFixture()
        try f.ns.ip("addr", "add", "10.1.0.1/24", "dev", "wlan0")
        try f.ns.ip("route", "add", "default", "via", "10.1.0.2", "dev", "wlan0", "metric", "100")
        let links = try waitForLinks(f.socket, "wlan0 usable, every link with carrier") { l in
            l[name: "wlan0"]?.usable == true && ["wlan0p", "wwan0", "wwan0p"].allSatisfy { l[name: $0]?.carrier == true }
        }
        let r = try ctl(["--socket", f.socket, "links"])
        XCTAssertEqual(r.status, 0, r.summary)
        let rows = r.lines
        let header = ["IDX", "NAME", "KIND", "METERED", "STATE", "DEFAULT", "METRIC", "USABLE", "ADDRESSES"]
        XCTAssertEqual(rows.first?.split(separator: " ").map(String.init), header, r.stdout)
        XCTAssertEqual(rows.count, links.count + 1, "a header and one row per link:\n\(r.stdout)")
        for l in links {
            guard let row = rows.dropFirst().first(where: { $0.split(separator: " ").dropFirst().first == Substring(l.name) })
            else {
                XCTFail("no row for \(l.name):\n\(r.stdout)")
                continue
            }
            let expected = [
                String(l.index), l.name, l.kind, l.metered ? "yes" : "no", Self.state(l), l.defaultRouteV4 ? "ipv4" : "-",
                l.metric.map(String.init) ?? "-", l.usable ? "yes" : "no",
            ] + (l.addresses.isEmpty ? ["-"] : [l.addresses[0]])
                + (l.addresses.count > 1 ? ["+\(l.addresses.count - 1)"] : [])
            XCTAssertEqual(row.split(separator: " ").map(String.init), expected, "row for \(l.name): '\(row)'")
        }
        XCTAssertTrue(rows.contains { $0.hasPrefix("\(links[name: "wlan0"]!.index)  ") && $0.contains(" wlan0 ")
            && $0.contains(" wifi ") && $0.contains(" routable ") && $0.hasSuffix("  10.1.0.1/24") }, r.stdout)
    }

    /// The STATE column as the help describes it, in networkctl's words.
    static func state(_ l: DaemonLink) -> String {
        if !l.adminUp { return "off" }
        if !l.carrier { return "no-carrier" }
        if l.operstate != "up" && l.operstate != "unknown" { return l.operstate }
        return l.defaultRouteV4 || l.defaultRouteV6 ? "routable" : "carrier"
    }

    func testJsonPrintsTheDaemonsReply() throws {
        let f = try makeFixture()
        try waitForLinks(f.socket, "every veth has carrier") { l in
            ["wlan0", "wlan0p", "wwan0", "wwan0p"].allSatisfy { l[name: $0]?.carrier == true }
        }
        for (command, verb) in [("status", "STATUS"), ("links", "LINKS"), ("ping", "PING")] {
            let direct = try socat(f.socket, [verb])
            let r = try ctl(["--socket", f.socket, "--json", command])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertEqual(r.stdout, direct.joined(separator: "\n") + "\n",
                           "netpermctl --json \(command) prints the daemon's reply line as it is")
        }
        let ping = try ctl(["--socket", f.socket, "ping"])
        XCTAssertEqual(ping.status, 0, ping.summary)
        XCTAssertEqual(ping.stdout, "pong\n")
    }

    /// The agent says both ways out, and Ctrl-D (the end of its input) is one of them.
    func testAgentBannerAndEndOfInput() throws {
        let f = try makeFixture()
        let r = try ctl(["--socket", f.socket, "agent"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines, ["netpermctl agent: waiting for prompts; answers are for the asking uid's processes (e: "
                                    + "everyone's) (one key each; Ctrl-D or Ctrl-C to stop)",
                                 "end of input: no more answers"], r.summary)
    }

    // MARK: - help, --version and usage errors (no daemon needed)

    /// The commands as the spec names them, independent of netpermctl's own table.
    static let synopses = [
        "status", "links [IFACE]", "query [APP]", "apps", "reload", "check [PATH]", "monitor [APP]",
        "wait [--app APP] [--timeout SECONDS] [-- COMMAND [ARGS...]]", "prompts", "decide APP KIND allow|deny [--once]",
        "forget APP [KIND]", "decisions", "agent [--notify]", "usage [reset] [APP]", "report [clear|on|off] [APP]", "ping", "help [COMMAND]",
    ]

    func testHelpListsEveryCommandAndDescribesEach() throws {
        let help = try ctl(["help"])
        XCTAssertEqual(help.status, 0, help.summary)
        XCTAssertEqual(help.stderr, "", help.summary)
        let lines = help.lines
        for synopsis in Self.synopses {
            guard let i = lines.firstIndex(where: { $0.hasPrefix("  \(synopsis)") }) else {
                XCTFail("no line for '\(synopsis)' in:\n\(help.stdout)")
                continue
            }
            // The summary follows on the same line, or on the next when the synopsis is long.
            let rest = lines[i].dropFirst(2 + synopsis.count).trimmingCharacters(in: .whitespaces)
            let summary = rest.isEmpty && i + 1 < lines.count ? lines[i + 1].trimmingCharacters(in: .whitespaces) : rest
            XCTAssertGreaterThan(summary.count, 10, "a one-line summary for '\(synopsis)':\n\(help.stdout)")
        }
        XCTAssertTrue(lines.allSatisfy { $0.count <= 100 }, help.stdout)
        for args in [["--help"], ["-h"]] {
            let same = try ctl(args)
            XCTAssertEqual(same.status, 0, same.summary)
            XCTAssertEqual(same.stdout, help.stdout, "netpermctl \(args) is netpermctl help")
        }

        for synopsis in Self.synopses {
            let name = String(synopsis.prefix { $0 != " " })
            let one = try ctl(["help", name])
            XCTAssertEqual(one.status, 0, one.summary)
            XCTAssertEqual(one.lines.first, "usage: netpermctl \(synopsis)", one.summary)
            XCTAssertGreaterThan(one.lines.filter { !$0.isEmpty }.count, 1,
                                 "a description after the usage: \(one.summary)")
            XCTAssertTrue(one.lines.allSatisfy { $0.count <= 100 }, one.stdout)
            for flag in ["--help", "-h"] {
                let after = try ctl([name, flag])
                XCTAssertEqual(after.status, 0, after.summary)
                XCTAssertEqual(after.stdout, one.stdout, "netpermctl \(name) \(flag) is netpermctl help \(name)")
            }
        }

        let nosuch = try ctl(["help", "nosuch"])
        XCTAssertEqual(nosuch.status, 2, nosuch.summary)
        XCTAssertEqual(nosuch.stdout, "", nosuch.summary)
        XCTAssertEqual(nosuch.stderr, "netpermctl: unknown command 'nosuch'\ntry 'netpermctl help'\n", nosuch.summary)
    }

    func testVersion() throws {
        let ctlVersion = try ctl(["--version"])
        XCTAssertEqual(ctlVersion.status, 0, ctlVersion.summary)
        XCTAssertEqual(ctlVersion.stdout, "netpermctl 0.1.0\n", ctlVersion.summary)
        let after = try ctl(["status", "--version"])
        XCTAssertEqual(after.stdout, "netpermctl 0.1.0\n", "--version after a command: \(after.summary)")
        let daemonVersion = try Subprocess.run([netpermd, "--version"])
        XCTAssertEqual(daemonVersion.status, 0, daemonVersion.summary)
        XCTAssertEqual(daemonVersion.stdout, "netpermd 0.1.0\n", daemonVersion.summary)
    }

    /// A usage error is the line that applies, the command's usage and a pointer to its help: never the
    /// whole command list, always exit 2, nothing on stdout.
    func testUsageErrorsAreShort() throws {
        let cases: [([String], [String])] = [
            (["decide", "maps"], ["netpermctl: decide needs APP KIND allow|deny (missing KIND and allow|deny)",
                                  "usage: netpermctl decide APP KIND allow|deny [--once]",
                                  "try 'netpermctl help decide'"]),
            (["forget"], ["netpermctl: forget needs APP (missing APP)", "usage: netpermctl forget APP [KIND]",
                          "try 'netpermctl help forget'"]),
            (["status", "extra"], ["netpermctl: status: unexpected argument 'extra'", "usage: netpermctl status",
                                   "try 'netpermctl help status'"]),
            (["query", "a", "b"], ["netpermctl: query: unexpected argument 'b'", "usage: netpermctl query [APP]",
                                   "try 'netpermctl help query'"]),
            (["--frob", "status"], ["netpermctl: unknown option '--frob'", "try 'netpermctl help status'"]),
            (["links", "-x"], ["netpermctl: unknown option '-x'", "try 'netpermctl help links'"]),
            (["--frob"], ["netpermctl: unknown option '--frob'", "try 'netpermctl help'"]),
            (["frob"], ["netpermctl: unknown command 'frob'", "try 'netpermctl help'"]),
            (["status", "--once"], ["netpermctl: --once is only for decide", "usage: netpermctl status",
                                    "try 'netpermctl help status'"]),
            (["ping", "--app", "x"], ["netpermctl: --app is only for wait and run", "usage: netpermctl ping",
                                      "try 'netpermctl help ping'"]),
            (["links", "--", "true"], ["netpermctl: '-- COMMAND' is only for wait and run", "usage: netpermctl links [IFACE]",
                                       "try 'netpermctl help links'"]),
            (["wait", "--timeout", "soon"], [
                "netpermctl: --timeout needs seconds, e.g. 30 or 0.5, not 'soon'",
                "usage: netpermctl wait [--app APP] [--timeout SECONDS] [-- COMMAND [ARGS...]]",
                "try 'netpermctl help wait'",
            ]),
            (["status", "--socket"], ["netpermctl: --socket needs a path", "usage: netpermctl status",
                                      "try 'netpermctl help status'"]),
        ]
        for (args, expected) in cases {
            let r = try ctl(args)
            XCTAssertEqual(r.status, 2, r.summary)
            XCTAssertEqual(r.stdout, "", r.summary)
            XCTAssertEqual(r.stderr.split(separator: "\n").map(String.init), expected, r.summary)
        }

        // No command at all: the list of commands, on stderr.
        let none = try ctl([])
        XCTAssertEqual(none.status, 2, none.summary)
        XCTAssertEqual(none.stdout, "", none.summary)
        for synopsis in Self.synopses {
            XCTAssertTrue(none.stderr.contains("  \(synopsis)"), "'\(synopsis)' in: \(none.summary)")
        }

        // After `--`, --help belongs to the command wait would run: wait runs out of time, it prints no help.
        let dir = try makeTempDir()
        let r = try ctl(["--socket", "\(dir)/missing.sock", "wait", "--timeout", "0.2", "--", "echo", "--help"])
        XCTAssertEqual(r.status, 3, r.summary)
        XCTAssertEqual(r.stdout, "", r.summary)
    }
}
