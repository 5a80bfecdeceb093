// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import NetpermProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Defect 7 of issue 14: an unprivileged user ran a program from a directory named `ESC[2K ESC[1A \r ... BEL`, and
/// `netpermctl agent` printed the path as it was: the asker rewrote the prompt line the admin answers. Whatever
/// text netpermctl prints (paths, app, unit and link names, the daemon's messages, policy errors) reaches the
/// terminal escaped, and no such text can start a line of its own.
final class TerminalEscapeTests: IntegrationTestCase {
    /// Erase the line, go up one, back to its start, set the window title, CSI as one C1 byte, reverse the text,
    /// a line separator, DEL, then a line of its own.
    static let hostile = "\u{1B}[2K\u{1B}[1A\r\u{1B}]0;pwned\u{7}\u{9B}31m\u{202E}\u{2028}\u{7F}\nFORGED"
    /// How netpermctl shows it (man netpermctl, "Untrusted text").
    static let shown = #"\x1b[2K\x1b[1A\r\x1b]0;pwned\x07\u{9b}31m\u{202e}\u{2028}\x7f\nFORGED"#
    /// With -t, whose fields escape '\' and ':' with '\'.
    static let shownTerse = shown.replacingOccurrences(of: "\\", with: "\\\\")

    /// What must never reach a terminal as it is: C0 controls but the newline, DEL, C1, U+2028-202E, U+2066-2069.
    static func unsafe(_ c: Unicode.Scalar) -> Bool {
        switch c.value {
        case 0x0A: return false
        case 0..<0x20, 0x7F...0x9F, 0x2028...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    private func assertSafe(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let bad = text.unicodeScalars.filter(Self.unsafe).map { "U+" + String($0.value, radix: 16) }
        XCTAssertEqual(bad, [], "\(what) wrote controls to the terminal:\n\(text.debugDescription)", file: file, line: line)
        let forged = text.split(separator: "\n").filter { $0.hasPrefix("FORGED") }
        XCTAssertEqual(forged, [], "\(what) let a name start a line:\n\(text)", file: file, line: line)
    }

    // MARK: - The defect, end to end

    /// An unprivileged user's program, in a directory whose name is the attack, asks to use WWAN; the agent's
    /// question shows the path escaped, on the one line the admin answers.
    func testAgentShowsAHostileExecutablePathEscaped() throws {
        let ns = try makeNamespace()
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        chmod(dir, 0o755)
        let hostileDir = dir + "/" + Self.hostile
        try FileManager.default.createDirectory(atPath: hostileDir, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o755])
        let program = hostileDir + "/socat"
        try FileManager.default.copyItem(atPath: Subprocess.resolve("socat"), toPath: program)
        chmod(program, 0o755)
        // Every app not in the policy asks before it may use WWAN.
        let config = try writeConfig("[Interface wwan0]\nKind=wwan\n\n[Defaults]\nWWAN=ask\n", in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0")
        try waitForLinks(socket, "wwan0 is usable") { $0[name: "wwan0"]?.usable == true }

        let stdin = try Subprocess.makePipe()
        let stdout = try Subprocess.makePipe()
        let agent = try Subprocess.spawn([netpermctl, "--socket", socket, "agent"], stdin: .fd(stdin.read),
                                         stdout: .fd(stdout.write), stderr: .fd(stdout.write))
        close(stdin.read)
        close(stdout.write)
        let out = FDLineReader(fd: stdout.read)
        var stdinOpen = true
        addTeardownBlock {
            if stdinOpen { close(stdin.write) }
            agent.killAndReap()
            close(stdout.read)
        }
        try out.waitForText("waiting for prompts")

        // The program asks about itself, as nobody, and stays (its prompt with it).
        let app = try HeldAsker(self, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", program, "-t", "60",
                                       "-", "UNIX-CONNECT:\(socket)"])
        let verdict = try app.ask("QUERY")
        XCTAssertEqual(verdict["reason"] as? String, "awaiting-decision", "\(verdict)")
        XCTAssertEqual((verdict["identity"] as? [String: Any])?["executable"] as? String, program, "\(verdict)")
        try out.waitForText("[s] skip")
        XCTAssertTrue(out.allText.contains("socat (\(dir)/\(Self.shown)/socat, run by nobody) asks to use cellular data via "
            + "wwan0 (cellular, metered)."), out.allText.debugDescription)
        assertSafe(out.allText, "netpermctl agent")

        try writeText(toFD: stdin.write, "s\n")
        try out.waitForText("skipped")
        close(stdin.write)
        stdinOpen = false
        XCTAssertEqual(agent.wait(timeout: 10), 0, out.allText)
        assertSafe(out.allText, "netpermctl agent")
    }

    // MARK: - Every command, from a daemon whose every string is hostile

    /// Replies shaped as docs/PROTOCOL.md has them, with `§` for every string the daemon passes on from others.
    private static func replies(for line: String) -> [String] {
        let h = JSON.string(hostile).encoded()
        func fill(_ template: String) -> String { template.replacingOccurrences(of: "§", with: h) }
        let link = #"{"index":3,"name":§,"kind":§,"classified_by":§,"metered":true,"admin_up":true,"carrier":false,"#
            + #""operstate":§,"addresses":[§,"10.0.0.1/24"],"default_route":{"ipv4":true,"ipv6":false},"metric":600,"#
            + #""usable":false}"#
        let changedLink = link.replacingOccurrences(of: #""operstate":§"#, with: #""operstate":"up""#)
            .replacingOccurrences(of: "10.0.0.1/24", with: "10.0.0.2/24")
        let identity = #""identity":{"pid":812,"uid":0,"executable":§,"unit":§,"problem":§}"#
        let kinds = #""denied_kinds":[§],"pending_kinds":[§],"#
            + #""permissions":{"wifi":§,"wwan":"deny","ethernet":"allow","other":"allow"},"#
            + #""sources":{"wifi":§,"wwan":"policy","ethernet":"policy","other":"policy"},"#
        let routedElsewhere = #""app":§,"matched_by":§,"available":false,"reason":"routed-elsewhere","via":null,"#
            + #""egress":{"ipv4":{"index":4,"name":§,"kind":§,"metered":true,"usable":true,"allowed":false},"#
            + #""ipv6":null},"bind_to":{"index":3,"name":§,"kind":§,"metered":false},"# + kinds
            + #""enforced":false,"enforced_why":§,"# + identity
        let strange = #""app":§,"matched_by":§,"available":false,"reason":§,"#
            + #""via":{"index":3,"name":§,"kind":§,"metered":true},"# + kinds + identity
        let prompt = #""id":7,"app":§,"identity":{"pid":99,"uid":65534,"executable":§,"unit":§},"kind":§,"#
            + #""link":{"name":§,"metered":true}"#
        let policy = #""generation":1,"apps":2,"error":§"#
        let words = line.split(separator: " ").map(String.init)
        switch words.first ?? "" {
        case "STATUS":
            // What issue 23 added to the human and terse outputs: the policy's warnings, enforcement's error.
            let findings = #","warnings":1,"findings":[{"file":§,"line":3,"section":§,"severity":§,"message":§}]"#
            let enforcement = #""enforcement":{"mode":§,"state":§,"error":§,"attempts":2,"#
                + #""steering":{"state":§,"error":§}}"#
            return [fill(#"{"ok":true,"version":§,"ready":true,"agents":0,"links":1,"available":true,"primary":§,"#
                + #""primary_kind":§,"egress":{"ipv4":null,"ipv6":null},"policy":{"# + policy + findings + "},"
                + enforcement + "}")]
        case "LINKS": return [fill(#"{"ok":true,"links":["# + link + "]}")]
        case "QUERY": return [fill(#"{"ok":true,"# + routedElsewhere + "}")]
        case "APPS": return [fill(#"{"ok":true,"apps":[{"# + routedElsewhere + "},{" + strange + "}]}")]
        case "PROMPTS": return [fill(#"{"ok":true,"prompts":[{"# + prompt + "}]}")]
        case "ANSWER":
            // The agent's answer: an event first, then a refusal.
            return [fill(#"{"event":"prompt-expired","seq":2,"id":7,"app":§,"kind":§}"#),
                    fill(#"{"ok":false,"error":§,"message":§}"#)]
        case "DECIDE":
            return [fill(#"{"ok":true,"decided":{"app":§,"kind":§,"decision":§,"once":false,"#
                + #""overridden_by_policy":true},"# + strange + "}")]
        case "FORGET": return [fill(#"{"ok":true,"forgotten":true,"app":§,"kind":§}"#)]
        case "WAIT" where words.contains("okapp"): return [fill(#"{"ok":true,"# + strange + "}")]
        case "WAIT": return [fill(#"{"ok":false,"error":"timeout","message":§,"# + routedElsewhere + "}")]
        case "PING": return [#"{"ok":true,"pong":true}"#]
        case "SUBSCRIBE" where words.contains("prompts"):
            return [fill(#"{"ok":true,"subscribed":["prompts"],"app":§,"privileged":true}"#),
                    fill(#"{"event":"snapshot","seq":1,"prompts":[{"# + prompt + "}]}")]
        case "SUBSCRIBE":
            return [fill(#"{"ok":true,"subscribed":["links","apps"],"app":§,"privileged":true}"#),
                    fill(#"{"event":"snapshot","seq":1,"links":["# + link + #"],"apps":[{"# + routedElsewhere
                        + #"}],"policy":{"# + policy + "}}"),
                    fill(#"{"event":"link","seq":2,"change":"changed","link":"# + changedLink + "}"),
                    fill(#"{"event":"app","seq":3,"# + strange + "}"),
                    fill(#"{"event":"policy","seq":4,"# + policy + "}"),
                    fill(#"{"event":"prompt","seq":5,"# + prompt + "}"),
                    #"{"event":"stopping","seq":6}"#]
        default:
            // RELOAD and anything else: an error, as the daemon words them, quoting what it was given.
            return [fill(#"{"ok":false,"error":§,"message":§}"#)]
        }
    }

    func testEveryCommandEscapesWhatTheDaemonSends() throws {
        let dir = try makeTempDir()
        let fake = try FakeDaemon(path: dir + "/fake.sock", reply: Self.replies)
        addTeardownBlock { fake.stop() }
        let socket = ["--socket", fake.path]
        let hostile = Self.hostile

        // (arguments, exit status, whether the hostile text is shown, and in which form)
        let runs: [([String], Int32, String?)] = [
            (["status"], 0, Self.shown), (["-t", "status"], 0, Self.shownTerse),
            (["links"], 0, Self.shown), (["-t", "links"], 0, Self.shownTerse),
            // Named as the kernel has it: found, then shown escaped. --json is the daemon's JSON, re-encoded.
            (["links", hostile], 0, Self.shown), (["-t", "links", hostile], 0, Self.shownTerse),
            (["--json", "links", hostile], 0, nil),
            (["links", "\u{1B}]0;other\u{7}"], 1, #"no link named '\x1b]0;other\x07'"#),
            (["query"], 0, Self.shown), (["-t", "query"], 0, Self.shownTerse), (["--json", "query"], 0, nil),
            (["apps"], 0, Self.shown), (["-t", "apps"], 0, Self.shownTerse),
            (["prompts"], 0, Self.shown), (["-t", "prompts"], 0, Self.shownTerse),
            (["decide", "a", "wwan", "allow"], 0, Self.shown), (["-t", "decide", "a", "wwan", "allow"], 0, Self.shownTerse),
            (["forget", "a"], 0, nil), (["-t", "forget", "a"], 0, Self.shownTerse),
            (["reload"], 1, Self.shown), (["-t", "reload"], 1, Self.shown), (["--json", "reload"], 1, nil),
            (["wait", "--app", "okapp"], 0, Self.shown), (["-t", "wait", "--app", "okapp"], 0, Self.shownTerse),
            (["wait", "--timeout", "1"], 4, Self.shown), (["-t", "wait", "--timeout", "1"], 4, Self.shownTerse),
            (["--json", "wait", "--timeout", "1"], 4, nil),
            ([hostile], 2, "netpermctl: unknown command '\(Self.shown)'"),
            (["query", "--" + hostile], 2, "netpermctl: unknown option '--\(Self.shown)'"),
        ]
        for (args, status, shown) in runs {
            let r = try ctl(socket + args)
            let what = "netpermctl \(args.joined(separator: " ").debugDescription)"
            XCTAssertEqual(r.status, status, "\(what): \(r.summary.debugDescription)")
            assertSafe(r.stdout, what + " (stdout)")
            assertSafe(r.stderr, what + " (stderr)")
            if let shown {
                XCTAssertTrue((r.stdout + r.stderr).contains(shown), "\(what): \(r.summary.debugDescription)")
            }
        }

        // A policy whose path and lines hold controls, checked offline.
        let conf = dir + "/\u{1B}[31m.conf"
        try "[Defaults]\nWWAN=\(hostile)\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let check = try ctl(["check", conf])
        XCTAssertEqual(check.status, 1, check.summary.debugDescription)
        assertSafe(check.stderr, "netpermctl check")
        XCTAssertTrue(check.stderr.contains(#"/\x1b[31m.conf:2: [Defaults]: bad value '\x1b[2K\x1b[1A\r"#),
                      check.stderr.debugDescription)
        for flag in ["-t", "--json"] {
            let r = try ctl([flag, "check", conf])
            XCTAssertEqual(r.status, 1, r.summary.debugDescription)
            assertSafe(r.stdout, "netpermctl \(flag) check")
        }

        // The monitor, for people (all apps, then only the hostile one) and for scripts; it runs until killed.
        for (args, last) in [(["monitor"], "[6] netpermd is stopping"), (["monitor", hostile], "[6] netpermd is stopping"),
                             (["-t", "monitor"], "6:stopping")] {
            let out = try Subprocess.makePipe()
            let monitor = try Subprocess.spawn([netpermctl] + socket + args, stdin: .devNull, stdout: .fd(out.write),
                                               stderr: .fd(out.write))
            close(out.write)
            let reader = FDLineReader(fd: out.read)
            defer {
                monitor.killAndReap()
                close(out.read)
            }
            try reader.waitForText(last)
            let text = reader.allText
            assertSafe(text, "netpermctl \(args)")
            XCTAssertTrue(text.contains(args.first == "-t" ? Self.shownTerse : Self.shown), text.debugDescription)
            if args == ["monitor", hostile] {
                XCTAssertTrue(text.contains("[3] app \(Self.shown): "), "APP matches as the daemon named it: \(text)")
            }
        }

        // The agent: the snapshot's prompt, a key it does not know, "once", and the daemon's refusal.
        let r = try Subprocess.run([netpermctl] + socket + ["agent"], input: Array("x\no\n".utf8))
        XCTAssertEqual(r.status, 0, r.summary.debugDescription)
        assertSafe(r.stdout, "netpermctl agent (stdout)")
        assertSafe(r.stderr, "netpermctl agent (stderr)")
        for expected in ["prompt 7: \(Self.shown) (\(Self.shown), \(Self.shown), run by nobody) asks to use \(Self.shown) via "
                            + "\(Self.shown) (?, metered).", "press y, n, o or s.", "netpermd refused: \(Self.shown)"] {
            XCTAssertTrue(r.stdout.contains(expected), "\(expected.debugDescription) in \(r.stdout.debugDescription)")
        }
    }
}
