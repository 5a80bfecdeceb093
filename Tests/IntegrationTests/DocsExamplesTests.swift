// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The README's and docs' examples, run as written, so that they cannot drift from the code: every command line
/// of every ```sh block against a netpermd running with its default paths (DefaultsSandbox), the systemctl lines
/// under a real systemd, every policy in an ```ini block through `netpermctl check`; and every field the daemon
/// sends must be named in docs/PROTOCOL.md.
final class DocsExamplesTests: IntegrationTestCase {
    static let documents = ["README.md", "docs/PROTOCOL.md", "docs/POLICY.md", "docs/CLASSIFICATION.md", "docs/ROUTING.md",
                            "docs/ARCHITECTURE.md", "docs/SYSTEMD.md", "docs/SECURITY.md", "docs/APPS.md",
                            "docs/METRICS.md", "docs/DBUS.md"]

    /// Commands that ask xdg-desktop-portal on a session bus: GLibMonitorTests runs them against the real portal.
    static func asksThePortal(_ command: String) -> Bool { command.contains("org.freedesktop.portal") }

    /// Commands that call netpermd on the system bus: BusFaceTests runs them, where a system bus and polkit run.
    static func callsTheBus(_ command: String) -> Bool { command.hasPrefix("busctl ") }

    struct Block {
        var file: String
        /// The line of the opening fence.
        var line: Int
        var language: String
        var lines: [String]
    }

    /// Fenced code blocks of a Markdown file.
    static func blocks(in file: String) throws -> [Block] {
        let text = try String(contentsOfFile: Repository.root + "/" + file, encoding: .utf8)
        var blocks: [Block] = []
        var open: Block?
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                if let b = open {
                    blocks.append(b)
                    open = nil
                } else {
                    open = Block(file: file, line: i + 1, language: String(line.dropFirst(3)), lines: [])
                }
            } else {
                open?.lines.append(String(line))
            }
        }
        return blocks
    }

    /// The commands of a shell block: one per line, `\` continuations joined, blank and comment lines dropped.
    static func commands(_ block: Block) -> [String] {
        var out: [String] = []
        var pending = ""
        for raw in block.lines {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasSuffix("\\") {
                pending += line.dropLast() + " "
                continue
            }
            out.append(pending + line)
            pending = ""
        }
        return out
    }

    /// What the docs tell an administrator to run after `make install`: the real-systemd example runs them.
    static func isSystemStep(_ command: String) -> Bool {
        command.hasPrefix("systemctl ") || command.hasPrefix("systemd-sysusers")
    }

    /// Commands that follow the daemon until stopped (documented as such): they pass if they print.
    static func follows(_ command: String) -> Bool {
        command.contains("monitor") || command.contains("SUBSCRIBE")
    }

    /// A namespace with wlan0 (wifi, default route metric 600) and wwan0 (wwan, metric 100) usable, the policy of
    /// `make run` as /etc/netpermd/netpermd.conf, and netpermd running with no arguments at all.
    private func sandboxWithDaemon(extraPolicy: String = "") throws -> (DefaultsSandbox, ChildProcess, String) {
        let ns = try makeTwoLinkNamespace(defaultRoutes: [("wlan0", 600), ("wwan0", 100)])
        let dir = try makeTempDir()
        let sandbox = try DefaultsSandbox(namespace: ns, scratch: dir + "/sandbox")
        addTeardownBlock { sandbox.close() }
        let runPolicy = try String(contentsOfFile: Repository.root + "/config/run.conf", encoding: .utf8)
        try sandbox.write(runPolicy + "\n[Interface wlan0]\nKind=wifi\n\n[Interface wwan0]\nKind=wwan\n" + extraPolicy,
                          to: "/etc/netpermd/netpermd.conf")
        let log = dir + "/netpermd.log"
        return (sandbox, try sandbox.startDaemon(self, log: log), log)
    }

    /// One example command line, in bash, from the repository's root, with the built programs first on PATH and the
    /// built GLib module where GLib finds it (as if installed); stopped after 4 s (status 124 then) with everything
    /// it printed.
    private func run(_ command: String, in sandbox: DefaultsSandbox) throws -> CommandResult {
        try Subprocess.run(sandbox.argv(["timeout", "4", "bash", "-c",
                                         "cd '\(Repository.root)' && PATH='\(Self.binDir)':$PATH && "
                                            + "export GIO_EXTRA_MODULES='\(GLibApp.moduleDir)' && \(command)"]),
                           timeout: 20)
    }

    func testEveryShellExampleWorksAsWritten() throws {
        let (sandbox, _, log) = try sandboxWithDaemon()
        var ran = 0
        for file in Self.documents {
            for block in try Self.blocks(in: file) where block.language == "sh" {
                for command in Self.commands(block) {
                    // `make run` and `make test` are what runs this test; `make install`, systemd-sysusers and
                    // systemctl are the real-systemd example below; apt-get installing the packages is PackageTests.
                    if command.hasPrefix("make ") || Self.isSystemStep(command) || command.hasPrefix("apt-get ")
                        || Self.asksThePortal(command) || Self.callsTheBus(command) {
                        continue
                    }
                    let r = try run(command, in: sandbox)
                    ran += 1
                    let where_ = "\(file):\(block.line): `\(command)`"
                    if Self.follows(command) {
                        XCTAssertEqual(r.status, 124, "\(where_) follows until stopped: \(r.summary)")
                        XCTAssertFalse(r.lines.isEmpty, "\(where_) printed nothing in 4 s: \(r.summary)")
                    } else {
                        XCTAssertEqual(r.status, 0, "\(where_): \(r.summary)\n--- netpermd log ---\n"
                            + ((try? String(contentsOfFile: log, encoding: .utf8))?.suffix(3000) ?? ""))
                        XCTAssertFalse(r.stdout.isEmpty, "\(where_) printed nothing: \(r.summary)")
                    }
                    // What the daemon says must be JSON wherever it is printed raw.
                    for line in r.lines where line.hasPrefix("{") {
                        XCTAssertNoThrow(try JSONValue.object(line), "\(where_) printed a line that is not JSON: \(line)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(ran, 15, "the docs' shell examples were found")
    }

    /// Issue 23: README's QUERY example had lost egress, bind_to, enforced, enforced_why and the metered dimension.
    /// It has the members of the daemon's reply, no more and no fewer.
    func testReadmeQueryExampleIsTheDaemonsReply() throws {
        let (sandbox, _, _) = try sandboxWithDaemon()
        let readme = try Self.blocks(in: "README.md").filter { $0.language == "json" }
        let example = try XCTUnwrap(readme.first { $0.lines.first?.hasPrefix(#"{"ok":true,"app":"#) == true },
                                    "README's QUERY example")
        let r = try Subprocess.run(sandbox.argv(["socat", "-", "UNIX-CONNECT:/run/netpermd/netpermd.sock"]),
                                   input: Array("QUERY\n".utf8))
        XCTAssertEqual(r.lines.count, 1, r.summary)
        XCTAssertEqual(try JSONValue.shape(example.lines.joined()), try JSONValue.shape(r.lines.first ?? ""),
                       "README.md:\(example.line) against \(r.stdout)")
    }

    /// docs/APPS.md's programs: each ```python block under Debian's /usr/bin/python3 (the GLib one through the built
    /// module), each ```c block compiled against json-glib, run in the sandbox as written; one that follows the
    /// daemon (`SUBSCRIBE`) must print before it is stopped, the others exit 0 having printed.
    func testAppsProgramsWorkAsWritten() throws {
        let (sandbox, _, log) = try sandboxWithDaemon()
        let dir = try makeTempDir()
        let flags = try Subprocess.check(["pkg-config", "--cflags", "--libs", "json-glib-1.0"]).stdout
            .split(whereSeparator: \.isWhitespace).map(String.init)
        var ran: [String: Int] = [:]
        for block in try Self.blocks(in: "docs/APPS.md") where ["python", "c"].contains(block.language) {
            let source = dir + "/\(block.line).\(block.language == "c" ? "c" : "py")"
            try block.lines.joined(separator: "\n").write(toFile: source, atomically: true, encoding: .utf8)
            var program = [GLibApp.python, source]
            if block.language == "c" {
                let r = try Subprocess.run(["gcc", "-Wall", "-Werror", "-o", source + ".bin", source] + flags, timeout: 60)
                XCTAssertEqual(r.status, 0, "docs/APPS.md:\(block.line): the C example does not compile: \(r.summary)")
                program = [source + ".bin"]
            }
            let follows = block.lines.contains { $0.contains("SUBSCRIBE") }
            let r = try Subprocess.run(sandbox.argv(["timeout", follows ? "2" : "4", "env",
                                                     "GIO_EXTRA_MODULES=\(GLibApp.moduleDir)"] + program), timeout: 20)
            ran[block.language, default: 0] += 1
            let where_ = "docs/APPS.md:\(block.line) (\(block.language))"
            if follows {
                XCTAssertEqual(r.status, 124, "\(where_) follows until stopped: \(r.summary)")
            } else {
                XCTAssertEqual(r.status, 0, "\(where_): \(r.summary)\n--- netpermd log ---\n"
                    + ((try? String(contentsOfFile: log, encoding: .utf8))?.suffix(3000) ?? ""))
            }
            XCTAssertFalse(r.stdout.isEmpty, "\(where_) printed nothing: \(r.summary)")
            if block.lines.contains(where: { $0.contains("Gio.NetworkMonitor") }) {
                XCTAssertTrue(r.stdout.hasPrefix("NetpermdNetworkMonitor"), "\(where_): the module answered: \(r.summary)")
            }
        }
        XCTAssertEqual(ran, ["python": 3, "c": 1], "the programs of docs/APPS.md were found")
    }

    /// The docs' systemctl blocks, in a real systemd after the same install as `make install`.
    func testSystemdExamplesWorkUnderARealSystemd() throws {
        let ns = try makeNamespace()
        let staged = try stageInstall()
        let sd = try RealSystemd(namespace: ns, staged: staged, scratch: try makeTempDir())
        addTeardownBlock { sd.shutdown() }
        var ran = 0
        for file in Self.documents {
            for block in try Self.blocks(in: file) where block.language == "sh" {
                for command in Self.commands(block) where Self.isSystemStep(command) {
                    let r = try sd.run(["bash", "-c", command])
                    ran += 1
                    XCTAssertEqual(r.status, 0, "\(file):\(block.line): `\(command)`: \(r.summary)")
                }
            }
        }
        XCTAssertGreaterThanOrEqual(ran, 3)
        XCTAssertEqual(try sd.run(["getent", "group", "netperm"]).status, 0, "systemd-sysusers made the group")
        let ping = try sd.run(["/usr/local/bin/netpermctl", "ping"])
        XCTAssertEqual(ping.status, 0, "after the docs' steps the daemon answers: \(ping.summary)")
    }

    /// Every ```ini block that is a netpermd policy (not a unit snippet, not the decisions file) passes
    /// `netpermctl check`; a drop-in example (its first line a comment naming a `.conf.d/` file) is checked beside
    /// the last main-file example before it (first line `# /etc/netpermd/netpermd.conf`).
    func testEveryPolicyExampleIsValid() throws {
        let dir = try makeTempDir()
        var checked = 0
        for file in Self.documents {
            var main: String?
            for block in try Self.blocks(in: file) where block.language == "ini" {
                let text = block.lines.joined(separator: "\n") + "\n"
                let first = block.lines.first ?? ""
                if block.lines.contains(where: { $0.hasPrefix("[Service]") || $0.hasPrefix("[Unit]") })
                    || first.hasSuffix("/decisions.conf") { continue }
                let config = dir + "/\(checked).conf"
                if first.hasPrefix("# "), first.contains(".conf.d/") {
                    let base = try XCTUnwrap(main, "\(file):\(block.line): a drop-in example with no main example before it")
                    try FileManager.default.createDirectory(atPath: config + ".d", withIntermediateDirectories: true)
                    try base.write(toFile: config, atomically: true, encoding: .utf8)
                    try text.write(toFile: config + ".d/50-example.conf", atomically: true, encoding: .utf8)
                } else {
                    try text.write(toFile: config, atomically: true, encoding: .utf8)
                    if first == "# /etc/netpermd/netpermd.conf" { main = text }
                }
                let r = try ctl(["check", config])
                checked += 1
                XCTAssertEqual(r.status, 0, "\(file):\(block.line): the policy example is not valid: \(r.summary)")
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 3)
    }

    /// README's options are the daemon's: the same `--option` words as `netpermd --help`.
    func testReadmeOptionsAreTheDaemonsOptions() throws {
        func options(_ text: String) -> Set<String> {
            Set(text.split(whereSeparator: { " \n[],".contains($0) }).filter { $0.hasPrefix("--") && $0.count > 2 }
                .map(String.init))
        }
        let help = try Subprocess.check([netpermd, "--help"])
        let readme = try Self.blocks(in: "README.md")
        let block = try XCTUnwrap(readme.first { $0.lines.first?.hasPrefix("netpermd [") == true }, "README's options")
        XCTAssertEqual(options(block.lines.joined(separator: "\n")), options(help.stdout))
        XCTAssertGreaterThanOrEqual(options(help.stdout).count, 7, help.stdout)
    }

    /// docs/METRICS.md's table is what `netpermctl metrics` writes: every family with its type, and no other; and
    /// promtool finds nothing to complain about in it.
    func testEveryMetricIsDocumentedAndPromtoolAcceptsThem() throws {
        let (sandbox, _, _) = try sandboxWithDaemon()
        let text = try Subprocess.check(sandbox.argv([netpermctl, "metrics"])).stdout
        var written: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let w = line.split(separator: " ")
            written[String(w[2])] = String(w[3])
        }
        var documented: [String: String] = [:]
        let doc = try String(contentsOfFile: Repository.root + "/docs/METRICS.md", encoding: .utf8)
        for line in doc.split(separator: "\n") where line.hasPrefix("| `netpermd_") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        XCTAssertEqual(documented, written, "docs/METRICS.md's table against what the daemon writes")
        XCTAssertGreaterThan(written.count, 20)
        let promtool = try Repository.requireTool("promtool", package: "prometheus")
        let check = try Subprocess.run([promtool, "check", "metrics"], input: Array(text.utf8))
        XCTAssertEqual(check.status, 0, check.summary)
        XCTAssertEqual(check.stdout + check.stderr, "", "promtool has nothing to say")
    }

    /// A session that makes the daemon send every kind of reply and event; every object key in them must be
    /// named in docs/PROTOCOL.md (as `key` or "key"), and every event name too.
    func testEveryFieldTheDaemonSendsIsDocumented() throws {
        let (sandbox, daemon, _) = try sandboxWithDaemon(extraPolicy: """

            [Defaults]
            PromptTimeoutSec=1

            [App tester]
            User=nobody
            WWAN=ask
            WiFi=ask

            """)
        let socket = sandbox.root + "/run/netpermd/netpermd.sock"
        var keys: Set<String> = []
        var events: Set<String> = []
        func collect(_ value: Any) {
            if let o = value as? [String: Any] {
                for (k, v) in o {
                    keys.insert(k)
                    // `names` is a map by locale (`{"de":"Karten"}`): its keys are a desktop file's, not fields.
                    if k != "names" { collect(v) }
                }
                if let e = o["event"] as? String { events.insert(e) }
            } else if let a = value as? [Any] {
                a.forEach(collect)
            }
        }
        // A socat no [App] names by executable, so that nobody running it is [App tester] (User=nobody).
        let copy = try makeTempDir()
        chmod(copy, 0o755)
        try FileManager.default.copyItem(atPath: Subprocess.resolve("socat"), toPath: copy + "/asker")
        func asNobody(_ line: String) throws {
            let r = try Subprocess.run(sandbox.argv(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                                     copy + "/asker", "-", "UNIX-CONNECT:/run/netpermd/netpermd.sock"]),
                                       input: Array((line + "\n").utf8))
            for l in r.lines { collect(try JSONValue.object(l)) }
        }

        let agent = try LiveConnection(path: socket)
        addTeardownBlock { agent.close() }
        let (ack, snapshot) = try agent.subscribe("links apps policy prompts")
        collect(ack)
        collect(snapshot)
        for request in ["PING", "HELP", "STATUS", "LINKS", "QUERY", "QUERY updater", "APPS", "PROMPTS", "RELOAD",
                        "NOPE", "WAIT tester 0.05", "DECIDE maps wwan allow", "FORGET maps", "METRICS"] {
            let (seen, reply) = try agent.request(request)
            seen.forEach(collect)
            collect(reply)
        }
        // A prompt whose asker exits at once: withdrawn.
        try asNobody("QUERY")
        let withdrawn = try agent.objects(until: "a prompt withdrawn") { $0["event"] as? String == "prompt-withdrawn" }
        withdrawn.forEach(collect)
        // An app that waits for itself (it stays): its prompt, answered once; forgotten, asked again and left to
        // expire; an answer too late; its user's own decision, as the privileged see it.
        let waiter = try HeldAsker(self, sandbox.argv(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                                       copy + "/asker", "-t", "60", "-",
                                                       "UNIX-CONNECT:/run/netpermd/netpermd.sock"]))
        try waiter.ask("WAIT", reply: false)
        let prompted = try agent.objects(until: "a prompt") { $0["event"] as? String == "prompt" }
        prompted.forEach(collect)
        let id = try JSONValue.int(try XCTUnwrap(prompted.last), "id")
        let (answered, reply) = try agent.request("ANSWER \(id) once")
        answered.forEach(collect)
        collect(reply)
        let done = try JSONValue.object(try XCTUnwrap(waiter.replies.nextLine(timeout: 5), "the WAIT's reply"))
        XCTAssertEqual(done["reason"] as? String, "ok", "\(done)")
        let (forgotten, forgot) = try agent.request("FORGET tester")
        forgotten.forEach(collect)
        collect(forgot)
        try waiter.ask("WAIT", reply: false)
        let expired = try agent.objects(until: "a prompt expiring", timeout: 5) {
            $0["event"] as? String == "prompt-expired"
        }
        expired.forEach(collect)
        let (_, late) = try agent.request("ANSWER \(id) allow")
        collect(late)
        try asNobody("DECIDE tester wwan deny")
        for request in ["QUERY tester", "DECISIONS"] {
            let (seen, reply) = try agent.request(request)
            seen.forEach(collect)
            collect(reply)
        }
        try asNobody("FORGET tester")
        // A link event, a failed reload's policy event, an error with the verdict (WAIT's timeout), QUIT.
        try sandbox.namespace.ip("link", "set", "wlan0p", "down")
        let linkEvents = try agent.objects(until: "a link event") { $0["event"] as? String == "link" }
        linkEvents.forEach(collect)
        let r = try Subprocess.run(sandbox.argv(["socat", "-", "UNIX-CONNECT:/run/netpermd/netpermd.sock"]),
                                   input: Array("QUIT\n".utf8))
        for l in r.lines { collect(try JSONValue.object(l)) }
        daemon.signal(SIGTERM)
        let stopping = try agent.objects(until: "stopping") { $0["event"] as? String == "stopping" }
        stopping.forEach(collect)

        let protocolDoc = try String(contentsOfFile: Repository.root + "/docs/PROTOCOL.md", encoding: .utf8)
        for key in keys.sorted() {
            XCTAssertTrue(protocolDoc.contains("`\(key)`") || protocolDoc.contains("\"\(key)\""),
                          "the daemon sends the field '\(key)', which docs/PROTOCOL.md never names")
        }
        for event in events.sorted() {
            XCTAssertTrue(protocolDoc.contains("| `\(event)` |"), "event '\(event)' has no row in docs/PROTOCOL.md's table")
        }
        XCTAssertTrue(["snapshot", "link", "app", "prompt", "prompt-answered", "prompt-expired", "prompt-withdrawn",
                       "stopping"]
            .allSatisfy(events.contains), "the session produced every kind of event: \(events.sorted())")
        XCTAssertGreaterThan(keys.count, 40, "\(keys.sorted())")
    }
}
