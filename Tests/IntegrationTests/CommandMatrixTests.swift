// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 23: `netpermctl --json` crashed on every error reply, and no test had run a command in --json mode against
/// an error. Every command `netpermctl help` lists runs here in each output mode (human, -t, --json) for a success and
/// for each error the daemon can answer it with (not-found, permission-denied as nobody, a usage error, a broken
/// policy for reload, the daemon unreachable), as root and as nobody, against one daemon. Each run must exit with the
/// code the README documents and never by a signal; --json must print exactly the daemon's JSON, one object a line,
/// and -t one record a line. A command added to `help` without cases here fails the test.
///
/// The release build (what `make install` ships; the crash was only there) runs too when NETPERMD_RELEASE_BIN names
/// it, as `make test` does.
final class CommandMatrixTests: IntegrationTestCase {
    static let policy = """
        [App maps]
        Executable=/nonexistent/maps
        WWAN=ask

        [App updater]
        Executable=/nonexistent/updater
        WiFi=deny
        WWAN=deny
        Ethernet=deny
        Other=deny

        """

    /// The builds of netpermctl to run: the one the other tests use, and the release build when given.
    static var clients: [String] {
        var bins = [IntegrationTestCase.binDir + "/netpermctl"]
        if let release = ProcessInfo.processInfo.environment["NETPERMD_RELEASE_BIN"], !release.isEmpty {
            bins.append(release + "/netpermctl")
        }
        return bins
    }

    enum Mode: CaseIterable { case human, terse, json }

    /// `run` as root with no service manager to reach (a fresh /run), whatever the machine has; as nobody, no
    /// XDG_RUNTIME_DIR: either way exit 5, the same on every machine. `run`'s success needs a real systemd:
    /// RealSystemdUserRunTests.
    static let noUserManager = ["env", "-u", "DBUS_SYSTEM_BUS_ADDRESS", "-u", "DBUS_SESSION_BUS_ADDRESS",
                                "-u", "XDG_RUNTIME_DIR"]
    static let noManager = noUserManager + ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                            "mount -t tmpfs npt-run /run && exec \"$@\"", "sh"]

    func cases(good: String, broken: String, missing: String) -> [MatrixCase] {
        typealias C = MatrixCase
        var c: [MatrixCase] = []
        c += C.asking("status", ["status"], verb: "STATUS", usage: ["status", "extra"])

        c += C.asking("links", ["links"], verb: "LINKS", terse: .rows(9), usage: ["links", "a", "b"])
        c.append(C(command: "links", kind: "success", args: ["links", "wlan0"], exit: 0, json: .objects,
                   terse: .keyValue, humanOutput: true))
        c.append(C(command: "links", kind: "not-found", args: ["links", "nosuch0"], exit: 1, json: .nothing,
                   terse: .nothing, humanOutput: false))

        c.append(.success("query", ["query", "maps"], verb: "QUERY maps"))
        c.append(.success("query", ["query"], verb: nil))
        c.append(.success("query", ["query"], verb: nil, user: .nobody))
        c.append(.refused("query", "not-found", ["query", "nosuch"], code: "not-found"))
        c.append(.refused("query", "permission-denied", ["query", "maps"], code: "permission-denied", user: .nobody))
        c += [.usage("query", ["query", "a", "b"]), .unreachable("query", ["query"], user: .root),
              .unreachable("query", ["query", "maps"], user: .nobody)]

        // Anyone's: a user gets their own apps.
        c += C.own("apps", ["apps"], verb: "APPS", terse: .rows(13), usage: ["apps", "x"])

        c += C.privileged("reload", ["reload"], verb: "RELOAD", exact: false, usage: ["reload", "x"])
        c.append(.refused("reload", "broken-policy", ["reload"], code: "policy-invalid"))

        // check asks no daemon: its findings are its output, on stdout with -t and --json whatever they say.
        c.append(C(command: "check", kind: "success", args: ["check", good], exit: 0, json: .objects,
                   terse: .rows(5), humanOutput: true))
        c.append(C(command: "check", kind: "success", args: ["check", good], user: .nobody, exit: 0, json: .objects,
                   terse: .rows(5), humanOutput: true))
        c.append(C(command: "check", kind: "pipe", args: ["check", "-"], exit: 0, json: .objects, terse: .rows(5),
                   humanOutput: true, input: Array((Self.standardConfig + Self.policy).utf8)))
        c.append(C(command: "check", kind: "broken-policy", args: ["check", broken], exit: 1, json: .objects,
                   terse: .rows(5), humanOutput: false))
        c.append(C(command: "check", kind: "not-found", args: ["check", missing], exit: 1, json: .objects,
                   terse: .rows(5), humanOutput: false))
        c.append(.usage("check", ["check", good, good]))

        c.append(C(command: "monitor", kind: "success", args: ["monitor"], exit: 130, json: .objects,
                   terse: .records, humanOutput: true, untilInterrupted: true))
        c.append(C(command: "monitor", kind: "success", args: ["monitor", "maps"], exit: 130,
                   json: .objects, terse: .records, humanOutput: true, untilInterrupted: true))
        // An app nobody may not follow (not theirs): said and failed, never silence for ever (issue 36, point 21).
        c.append(C(command: "monitor", kind: "not-found", args: ["monitor", "maps"], user: .nobody, exit: 1,
                   json: .nothing, terse: .nothing, humanOutput: false))
        c.append(.usage("monitor", ["monitor", "a", "b"]))
        c.append(.unreachable("monitor", ["monitor"], user: .nobody, socket: .locked))
        // Not running (yet): it says so and keeps waiting for the daemon, as the help says.
        c.append(C(command: "monitor", kind: "unreachable-waits", args: ["monitor"], socket: .missing, exit: 130,
                   json: .nothing, terse: .nothing, humanOutput: false, untilInterrupted: true))

        c.append(.success("wait", ["wait", "--app", "maps", "--timeout", "5"], verb: "WAIT maps"))
        c.append(.success("wait", ["wait", "--timeout", "5"], verb: nil, user: .nobody))
        c.append(C(command: "wait", kind: "timeout", args: ["wait", "--app", "updater", "--timeout", "0.05"], exit: 4,
                   json: .error("timeout"), terse: .keyValue, humanOutput: false))
        c.append(.refused("wait", "not-found", ["wait", "--app", "nosuch", "--timeout", "1"], code: "not-found"))
        c.append(.refused("wait", "permission-denied", ["wait", "--app", "maps", "--timeout", "1"],
                          code: "permission-denied", user: .nobody))
        c += [.usage("wait", ["wait", "--timeout", "soon"]),
              .unreachable("wait", ["wait", "--timeout", "0.1"], user: .root),
              .unreachable("wait", ["wait", "--timeout", "0.1"], user: .nobody)]

        for user in [MatrixCase.User.root, .nobody] {
            c.append(C(command: "run", kind: "no-service-manager", args: ["run", "--app", "maps", "--", "true"],
                       user: user, exit: 5, json: .nothing, terse: .nothing, humanOutput: false,
                       wrapper: user == .root ? Self.noManager : Self.noUserManager))
        }
        c += [.usage("run", ["run", "--app", "maps"]), .usage("run", ["run", "--", "true"])]

        // A user sees, decides and forgets for their own processes (UserDecisions=yes, the default).
        c += C.own("prompts", ["prompts"], verb: "PROMPTS", terse: .rows(8), usage: ["prompts", "x"])

        c += C.own("decide", ["decide", "maps", "wwan", "allow", "--once"], verb: "DECIDE maps wwan allow --once",
                   usage: ["decide", "maps"])
        c.append(.refused("decide", "bad-arguments", ["decide", "maps", "bogus", "allow"], code: "bad-arguments"))

        c += C.own("forget", ["forget", "maps", "wwan"], verb: "FORGET maps wwan", exact: false, usage: ["forget"])
        c.append(.refused("forget", "bad-arguments", ["forget", "9bad"], code: "bad-arguments"))

        c += C.own("decisions", ["decisions"], verb: "DECISIONS", exact: false, terse: .rows(5), usage: ["decisions", "x"])

        // The agent asks a person, in words (its input ends at once here); -t and --json are refused as usage
        // errors (issue 36, 21: it printed words for them). With --notify and no session bus it says so and exits 6.
        for user in [MatrixCase.User.root, .nobody] {
            c.append(C(command: "agent", kind: "success", args: ["agent"], user: user, exit: 0, json: .words,
                       terse: .words, humanOutput: true, humanOnly: true))
            c.append(C(command: "agent", kind: "no-machine-form", args: ["agent"], user: user, exit: 2,
                       json: .nothing, terse: .nothing, humanOutput: false, humanOnly: false))
            c.append(C(command: "agent", kind: "no-notification-server", args: ["agent", "--notify"], user: user, exit: 6,
                       json: .nothing, terse: .nothing, humanOutput: false, wrapper: Self.noUserManager, humanOnly: true))
        }
        c.append(.usage("agent", ["agent", "x"]))
        for user in [MatrixCase.User.root, .nobody] {
            var unreachable = MatrixCase.unreachable("agent", ["agent"], user: user)
            unreachable.humanOnly = true
            c.append(unreachable)
        }

        // The maker of apps' scopes runs until the daemon goes (or it is stopped), saying only that it started and
        // what failed, on standard error, in every mode.
        for user in [MatrixCase.User.root, .nobody] {
            c.append(C(command: "scopes", kind: "success", args: ["scopes"], user: user, exit: 130, json: .nothing,
                       terse: .nothing, humanOutput: false, untilInterrupted: true))
        }
        c.append(.usage("scopes", ["scopes", "x"]))
        c.append(.unreachable("scopes", ["scopes"], user: .nobody, socket: .locked))

        // The exposition text in human and -t modes; counters move between two asks, so --json is compared member by
        // member.
        c += C.privileged("metrics", ["metrics"], verb: "METRICS", exact: false, terse: .words, usage: ["metrics", "x"])
        c.append(.usage("metrics", ["metrics", "--output"]))

        // Nothing counts here ([Usage] Count=no): the totals stored, all zero, and resets of them.
        // Another's app is not-found, as one that does not exist (issue 31, point 12: QUERY tells no more).
        c += [.success("usage", ["usage", "maps"], verb: "USAGE maps", exact: false, terse: .rows(12)),
              .refused("usage", "not-found", ["usage", "maps"], code: "not-found", user: .nobody),
              .usage("usage", ["usage", "maps", "updater"]),
              .unreachable("usage", ["usage", "maps"], user: .root), .unreachable("usage", ["usage", "maps"], user: .nobody)]
        c.append(.success("usage", ["usage"], verb: "USAGE", exact: false, terse: .rows(12)))
        c.append(.refused("usage", "not-found", ["usage", "nosuch"], code: "not-found"))
        c.append(.success("usage", ["usage", "reset", "maps"], verb: "RESET-USAGE maps", exact: false))
        c.append(.refused("usage", "permission-denied", ["usage", "reset"], code: "permission-denied", user: .nobody))

        // The report is off here: nothing recorded, one's own switch, clearing; another's app is not-found.
        c += [.success("report", ["report"], verb: "REPORT", terse: .nothing),
              .success("report", ["report"], verb: "REPORT", terse: .nothing, user: .nobody),
              .refused("report", "not-found", ["report", "maps"], code: "not-found", user: .nobody),
              .usage("report", ["report", "maps", "updater"]),
              .unreachable("report", ["report"], user: .root), .unreachable("report", ["report"], user: .nobody),
              .success("report", ["report", "on"], verb: "KEEP-REPORT yes", user: .nobody),
              .success("report", ["report", "clear", "maps"], verb: "RESET-REPORT maps")]

        c += C.asking("ping", ["ping"], verb: "PING", terse: .words, usage: ["ping", "x"])

        c.append(C(command: "help", kind: "success", args: ["help"], exit: 0, json: .words, terse: .words,
                   humanOutput: true))
        c.append(C(command: "help", kind: "success", args: ["help", "query"], user: .nobody, exit: 0, json: .words,
                   terse: .words, humanOutput: true))
        c.append(.usage("help", ["help", "nosuch"]))
        return c
    }

    func testEveryCommandInEveryModeForEveryAnswer() throws {
        let f = try makeAppFixture(policy: Self.policy)
        try f.addAddress("wlan0")
        try f.addDefaultRoute("wlan0", metric: 100)
        try waitForVerdict(f.socket, "maps", "available via wlan0") { $0.reason == "ok" }
        let good = f.dir + "/good.conf", broken = f.dir + "/broken.conf"
        try (Self.standardConfig + Self.policy).write(toFile: good, atomically: true, encoding: .utf8)
        try (Self.policy + "WiFi=sometimes\n").write(toFile: broken, atomically: true, encoding: .utf8)
        let locked = try makeTempDir()
        let all = cases(good: good, broken: broken, missing: f.dir + "/missing.conf")
        let sockets: [MatrixCase.Socket: String] = [.daemon: f.socket, .missing: f.dir + "/missing.sock",
                                                    .locked: locked + "/netpermd.sock"]

        var runs = 0
        let started = monotonicNow()
        for client in Self.clients {
            // Every command help lists has cases here, and every command here is one help lists.
            let listed = try Self.helpCommands(client)
            XCTAssertEqual(Set(all.map(\.command)), Set(listed), "the matrix's commands are `netpermctl help`'s")
            for command in listed {
                let kinds = Set(all.filter { $0.command == command }.map(\.kind))
                XCTAssertTrue(kinds.contains("usage"), "\(command) has no usage-error case in the matrix")
                XCTAssertTrue(kinds.contains("success") || command == "run",
                              "\(command) has no success case in the matrix")
            }
            // The broken policy is in force only for its own cases.
            for phase in [false, true] {
                if phase {
                    try (Self.standardConfig + Self.policy + "WiFi=sometimes\n")
                        .write(toFile: f.config, atomically: true, encoding: .utf8)
                }
                for (i, c) in all.enumerated() where (c.kind == "broken-policy" && c.command == "reload") == phase {
                    for mode in Mode.allCases where c.humanOnly.map({ $0 == (mode == .human) }) ?? true {
                        try check(c, mode: mode, client: client, socket: sockets[c.socket]!, shortJSON: i % 2 == 1)
                        runs += 1
                    }
                }
                if phase {
                    try (Self.standardConfig + Self.policy).write(toFile: f.config, atomically: true, encoding: .utf8)
                    XCTAssertEqual(try request(f.socket, "RELOAD")["ok"] as? Bool, true)
                    // The daemon also reloads by itself 200 ms after the file changed: not in the middle of the next
                    // cases, whose replies are compared with the daemon's own (its policy generation among them).
                    try settledPolicy(f.socket)
                }
            }
        }
        let commands = Set(all.map(\.command)).count
        print("command matrix: \(all.count) cases of \(commands) commands x \(Mode.allCases.count) modes x "
            + "\(Self.clients.count) builds: \(runs) runs in " + String(format: "%.1f", monotonicNow() - started) + " s")
    }

    /// The commands `netpermctl help` lists, in its order.
    static func helpCommands(_ client: String) throws -> [String] {
        let help = try Subprocess.check([client, "help"]).lines
        guard let start = help.firstIndex(of: "commands:") else { throw HarnessError("no commands in help") }
        return help[(start + 1)...].prefix { !$0.isEmpty }.filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    private func runAs(_ user: MatrixCase.User, _ argv: [String]) -> [String] {
        user == .root ? argv : Self.asNobody + argv
    }

    /// One case in one mode: runs it, and asserts the exit code, no signal, and what each mode must print.
    private func check(_ c: MatrixCase, mode: Mode, client: String, socket: String, shortJSON: Bool) throws {
        let flags: [String]
        switch mode {
        case .human: flags = []
        case .terse: flags = ["-t"]
        case .json: flags = [shortJSON ? "-j" : "--json"]
        }
        let argv = runAs(c.user, c.wrapper + [client, "--socket", socket] + flags + c.args)
        let r = c.untilInterrupted ? try interrupted(argv) : try Subprocess.run(argv, input: c.input, timeout: 20)
        let what = "\(c) \(flags.joined()) (\((client as NSString).deletingLastPathComponent))\n\(r.summary)"
        // 128 + N is a signal: the only one expected is the SIGINT that stops what runs until interrupted.
        XCTAssertEqual(r.status, c.exit, "exit code of " + what)
        guard r.status == c.exit else { return }
        if c.exit == 0 { XCTAssertEqual(r.stderr, "", "nothing on stderr: " + what) }

        switch mode {
        case .human:
            if c.humanOutput {
                XCTAssertFalse(r.stdout.isEmpty, "output: " + what)
            } else {
                XCTAssertEqual(r.stdout, "", "nothing on stdout: " + what)
                // check's findings are FILE:LINE: lines, as compilers print them; the rest say who speaks.
                XCTAssertTrue(c.command == "check" ? !r.stderr.isEmpty : r.stderr.hasPrefix("netpermctl: "),
                              "a message on stderr: " + what)
            }
        case .terse:
            switch c.terse {
            case .keyValue:
                if let p = TerseRecords.keyValueProblem(r.lines) { XCTFail("key:value lines (\(p)): " + what) }
            case let .rows(n):
                if let p = TerseRecords.rowsProblem(r.lines, fields: n) { XCTFail("rows: \(p): " + what) }
            case .records:
                XCTAssertFalse(r.lines.isEmpty, what)
                XCTAssertTrue(r.lines.allSatisfy { TerseRecords.fields($0).count >= 2 }, "records: " + what)
            case .nothing:
                XCTAssertEqual(r.stdout, "", "nothing on stdout: " + what)
            case .words:
                break
            }
        case .json:
            switch c.json {
            case let .reply(verb, exact):
                let direct = try daemonReply(verb, socket: socket, user: c.user)
                if exact {
                    XCTAssertEqual(r.lines, direct, "exactly the daemon's reply to \(verb): " + what)
                } else {
                    XCTAssertEqual(try r.lines.map(JSONValue.shape), try direct.map(JSONValue.shape),
                                   "the daemon's reply to \(verb), member by member: " + what)
                }
            case let .error(code):
                XCTAssertEqual(r.lines.count, 1, "one reply: " + what)
                let o = try JSONValue.object(r.lines.first ?? "{}")
                XCTAssertEqual(o["ok"] as? Bool, false, what)
                XCTAssertEqual(o["error"] as? String, code, what)
                // The reply says it all: no second telling on stderr (wait had one).
                XCTAssertEqual(r.stderr, "", "only the reply: " + what)
            case .objects:
                XCTAssertFalse(r.lines.isEmpty, "JSON: " + what)
                for line in r.lines { XCTAssertNoThrow(try JSONValue.object(line), "one object a line: " + what) }
            case .nothing:
                XCTAssertEqual(r.stdout, "", "nothing on stdout: " + what)
            case .words:
                break
            }
        }
    }

    /// Waits until the policy generation has stayed the same for longer than the daemon's reload debounce.
    private func settledPolicy(_ socket: String) throws {
        var last = -1, since = monotonicNow()
        try waitUntil("the policy generation settles") {
            let g = (try self.request(socket, "STATUS")["policy"] as? [String: Any])?["generation"] as? Int ?? -1
            if g != last { last = g; since = monotonicNow() }
            return (monotonicNow() - since > 0.5, "generation \(g)")
        }
    }

    private func daemonReply(_ verb: String, socket: String, user: MatrixCase.User) throws -> [String] {
        let r = try Subprocess.run(runAs(user, ["socat", "-t", "5", "-", "UNIX-CONNECT:\(socket)"]),
                                   input: Array((verb + "\n").utf8))
        guard r.status == 0 else { throw HarnessError("socat: \(r.summary)") }
        return r.lines
    }

    /// Runs `argv` until it prints a line (on stdout, or on stderr when it waits for the daemon), checks that it
    /// still runs, and stops it with SIGINT, as Ctrl-C would.
    private func interrupted(_ argv: [String]) throws -> CommandResult {
        let dir = try makeTempDir()
        let out = dir + "/out", err = dir + "/err"
        let p = try Subprocess.spawn(argv, stdin: .devNull, stdout: .appendFile(out), stderr: .appendFile(err))
        defer { p.killAndReap() }
        func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        try waitUntil("\(argv.joined(separator: " ")) prints a line", timeout: 10) {
            (text(out).contains("\n") || text(err).contains("\n") || !p.isRunning, text(out) + text(err))
        }
        if p.isRunning {
            p.signal(SIGINT)
        }
        let status = p.wait(timeout: 5) ?? -1
        return CommandResult(argv: argv, status: status, stdoutBytes: Array(text(out).utf8),
                             stderrBytes: Array(text(err).utf8))
    }
}
