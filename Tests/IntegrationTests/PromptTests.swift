// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Apps set to `ask`: prompts to agents, DECIDE/FORGET, lasting decisions on disk, and who may do what.
/// The app is a copy of socat under a path of its own, so only the processes a test starts match `[App asker]`.
final class PromptTests: IntegrationTestCase {
    struct Setup {
        var ns: TestNamespace
        var dir: String
        var socket: String
        var config: String
        /// The app's executable.
        var asker: String
        var daemon: DaemonProcess
        var stateDir: String { dir + "/state" }
        var decisionsFile: String { stateDir + "/decisions.conf" }
    }

    /// Only wwan0 (a veth end classified wwan by the config) is up with a default route; `asker` may use
    /// WWAN only if someone says so.
    func makeSetup(promptTimeout: Int = 30, secondApp: Bool = false, userDecisions: Bool = true) throws -> Setup {
        let ns = try makeNamespace()
        try ns.addVethPair("wwan0", peer: "wwan0p")
        let dir = try makeTempDir()
        // Unprivileged clients must reach the socket (0666) through the directory.
        chmod(dir, 0o755)
        let asker = dir + "/asker-socat"
        try FileManager.default.copyItem(atPath: Subprocess.resolve("socat"), toPath: asker)
        chmod(asker, 0o755)
        var second = ""
        if secondApp {
            try FileManager.default.copyItem(atPath: asker, toPath: dir + "/asker2-socat")
            second = "[App asker2]\nExecutable=\(dir)/asker2-socat\nWWAN=ask\n\n"
        }
        let config = try writeConfig(second + """
            [Interface wwan0]
            Kind=wwan

            [App asker]
            Executable=\(asker)
            WWAN=ask

            [Defaults]
            PromptTimeoutSec=\(promptTimeout)
            UserDecisions=\(userDecisions ? "yes" : "no")

            """, in: dir)
        let socket = dir + "/netpermd.sock"
        let daemon = try startDaemon(in: ns, socket: socket, config: config)
        try ns.ip("addr", "add", "10.2.0.1/24", "dev", "wwan0")
        try ns.ip("route", "add", "default", "via", "10.2.0.2", "dev", "wwan0")
        try waitForLinks(socket, "wwan0 is usable") { $0[name: "wwan0"]?.usable == true }
        return Setup(ns: ns, dir: dir, socket: socket, config: config, asker: asker, daemon: daemon)
    }

    /// The app asks about itself: `QUERY` through its own copy of socat, which exits (so a prompt it raised is
    /// withdrawn).
    private func askerQuery(_ s: Setup) throws -> [String: Any] {
        let r = try Subprocess.run([s.asker, "-", "UNIX-CONNECT:\(s.socket)"], input: Array("QUERY\n".utf8))
        guard r.status == 0, r.lines.count == 1 else { throw HarnessError("the app's QUERY: \(r.summary)") }
        return try JSONValue.object(r.lines[0])
    }

    /// The app running on: its own socat, kept until the test ends, so its prompt stays open.
    func runningAsker(_ s: Setup, _ program: String? = nil) throws -> HeldAsker {
        try HeldAsker(self, [program ?? s.asker, "-t", "60", "-", "UNIX-CONNECT:\(s.socket)"])
    }

    /// Runs `argv` as nobody (uid and gid 65534, no supplementary groups).
    private func asNobody(_ argv: [String], input: String = "") throws -> CommandResult {
        try Subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + argv,
                           input: Array(input.utf8))
    }

    private static func field(_ o: [String: Any], _ object: String, _ key: String) -> String? {
        (o[object] as? [String: Any])?[key] as? String
    }

    private func assertAwaiting(_ v: [String: Any], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(try JSONValue.bool(v, "ok"), true, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["app"] as? String, "asker", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(try JSONValue.bool(v, "available"), false, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["reason"] as? String, "awaiting-decision", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["pending_kinds"] as? [String], ["wwan"], "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["denied_kinds"] as? [String], [], "\(what): \(v)", file: file, line: line)
        XCTAssertTrue(v["via"] is NSNull, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "permissions", "wwan"), "ask", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "sources", "wwan"), "policy", "\(what): \(v)", file: file, line: line)
    }

    /// With no agent to ask, an undecided `ask` is a deny that says so.
    private func assertUnasked(_ v: [String: Any], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(try JSONValue.bool(v, "ok"), true, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["app"] as? String, "asker", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(try JSONValue.bool(v, "available"), false, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["reason"] as? String, "denied", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["denied_kinds"] as? [String], ["wwan"], "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["pending_kinds"] as? [String], [], "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "permissions", "wwan"), "deny", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "sources", "wwan"), "no-agent", "\(what): \(v)", file: file, line: line)
    }

    private func assertAllowedByDecision(_ v: [String: Any], _ what: String, file: StaticString = #filePath,
                                         line: UInt = #line) {
        XCTAssertEqual(try JSONValue.bool(v, "ok"), true, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["app"] as? String, "asker", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(try JSONValue.bool(v, "available"), true, "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["reason"] as? String, "ok", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "via", "name"), "wwan0", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["pending_kinds"] as? [String], [], "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "permissions", "wwan"), "allow", "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(Self.field(v, "sources", "wwan"), "decision", "\(what): \(v)", file: file, line: line)
    }

    private static func events(_ objects: [[String: Any]], _ name: String) -> [[String: Any]] {
        objects.filter { $0["event"] as? String == name }
    }

    /// The decisions file as app -> key -> value; nil when there is no file. Throws unless the file is whole:
    /// ends with a newline, and every line is blank, a comment, `[App NAME]` or `KEY=allow|deny` under one.
    static func parseDecisions(_ path: String) throws -> [String: [String: String]]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let text = String(data: data, encoding: .utf8) else { throw HarnessError("\(path) is not UTF-8") }
        guard text.isEmpty || text.hasSuffix("\n") else {
            throw HarnessError("\(path) does not end with a newline (torn?):\n\(text)")
        }
        var result: [String: [String: String]] = [:]
        var current: String?
        let validName = try Regex("^[A-Za-z][A-Za-z0-9._-]*$")
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[App "), line.hasSuffix("]") {
                let name = String(line.dropFirst(5).dropLast())
                guard name.wholeMatch(of: validName) != nil, result[name] == nil else {
                    throw HarnessError("\(path):\(i + 1): bad or repeated section '\(line)':\n\(text)")
                }
                result[name] = [:]
                current = name
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard let app = current, parts.count == 2, ["WiFi", "WWAN", "Ethernet", "Other"].contains(parts[0]),
                  ["allow", "deny"].contains(parts[1]), result[app]?[parts[0]] == nil else {
                throw HarnessError("\(path):\(i + 1): not a whole decision line '\(line)':\n\(text)")
            }
            result[app]?[parts[0]] = parts[1]
        }
        return result
    }

    // MARK: - Prompt, decision, restart, forget

    func testAgentDecisionLastsAcrossRestartUntilForgotten() throws {
        let s = try makeSetup()

        // No agent yet: nobody can be asked, so the app is told it may not use WWAN, and why.
        let first = try askerQuery(s)
        assertUnasked(first, "the app's first QUERY")
        XCTAssertEqual(first["matched_by"] as? String, "executable")
        XCTAssertEqual(Self.field(first, "identity", "executable"), s.asker)

        // An agent: a privileged subscriber of prompts (and apps).
        let agent = try LiveConnection(path: s.socket)
        addTeardownBlock { agent.close() }
        let (ack, snapshot) = try agent.subscribe("prompts apps")
        XCTAssertEqual(try JSONValue.bool(ack, "privileged"), true, "\(ack)")
        XCTAssertEqual((ack["subscribed"] as? [String]).map(Set.init), ["apps", "prompts"], "\(ack)")
        XCTAssertEqual((snapshot["prompts"] as? [Any])?.count, 0,
                       "no prompt was raised while there was no agent: \(snapshot)")
        let inSnapshot = (snapshot["apps"] as? [[String: Any]])?.first { $0["app"] as? String == "asker" }
        XCTAssertEqual(inSnapshot?["reason"] as? String, "awaiting-decision", "with an agent, ask waits: \(snapshot)")

        // The app asks twice: one prompt.
        let app = try runningAsker(s)
        assertAwaiting(try app.ask("QUERY"), "the app's second QUERY")
        assertAwaiting(try app.ask("QUERY"), "the app's third QUERY")
        // Events pushed before the PROMPTS reply arrive before it on the agent's connection.
        let (seen, listed) = try agent.request("PROMPTS")
        let prompts = Self.events(seen, "prompt")
        XCTAssertEqual(prompts.count, 1, "exactly one prompt for an app asking twice: \(seen)")
        let prompt = try XCTUnwrap(prompts.first)
        let id = try JSONValue.int(prompt, "id")
        XCTAssertEqual(prompt["app"] as? String, "asker", "\(prompt)")
        XCTAssertEqual(prompt["kind"] as? String, "wwan", "\(prompt)")
        let identity = try XCTUnwrap(prompt["identity"] as? [String: Any], "\(prompt)")
        XCTAssertEqual(identity["executable"] as? String, s.asker, "\(prompt)")
        XCTAssertEqual(try JSONValue.int(identity, "uid"), 0, "\(prompt)")
        let link = try XCTUnwrap(prompt["link"] as? [String: Any], "\(prompt)")
        XCTAssertEqual(link["name"] as? String, "wwan0", "\(prompt)")
        XCTAssertEqual(try JSONValue.bool(link, "metered"), true, "\(prompt)")
        let open = try XCTUnwrap(listed["prompts"] as? [[String: Any]], "\(listed)")
        XCTAssertEqual(open.compactMap { try? JSONValue.int($0, "id") }, [id], "PROMPTS lists the open prompt: \(listed)")
        XCTAssertEqual(open.first?["app"] as? String, "asker")

        // The answer.
        let decided = try request(s.socket, "DECIDE asker wwan allow")
        XCTAssertEqual(try JSONValue.bool(decided, "ok"), true, "\(decided)")
        let d = try XCTUnwrap(decided["decided"] as? [String: Any], "\(decided)")
        XCTAssertEqual(d["app"] as? String, "asker")
        XCTAssertEqual(d["kind"] as? String, "wwan")
        XCTAssertEqual(d["decision"] as? String, "allow")
        XCTAssertEqual(try JSONValue.bool(d, "once"), false)
        XCTAssertEqual(try JSONValue.bool(d, "overridden_by_policy"), false)
        XCTAssertEqual(try JSONValue.bool(decided, "available"), true, "\(decided)")
        XCTAssertEqual(Self.field(decided, "via", "name"), "wwan0", "\(decided)")
        XCTAssertEqual(Self.field(decided, "sources", "wwan"), "decision", "\(decided)")

        // The agent hears that its prompt was answered, and the app's new verdict.
        let after = try agent.objects(until: "an app event for asker") {
            $0["event"] as? String == "app" && $0["app"] as? String == "asker"
        }
        let answered = Self.events(after, "prompt-answered")
        XCTAssertEqual(answered.count, 1, "\(after)")
        XCTAssertEqual(answered.first.flatMap { try? JSONValue.int($0, "id") }, id, "\(after)")
        XCTAssertEqual(answered.first?["decision"] as? String, "allow", "\(after)")
        XCTAssertEqual(answered.first.flatMap { try? JSONValue.bool($0, "once") }, false, "\(after)")
        let appEvent = try XCTUnwrap(after.last)
        XCTAssertEqual(try JSONValue.bool(appEvent, "available"), true, "\(appEvent)")
        XCTAssertEqual(appEvent["reason"] as? String, "ok", "\(appEvent)")
        XCTAssertEqual(Self.field(appEvent, "via", "name"), "wwan0", "\(appEvent)")
        XCTAssertEqual(Self.field(appEvent, "sources", "wwan"), "decision", "\(appEvent)")
        let left = try request(s.socket, "PROMPTS")
        XCTAssertEqual((left["prompts"] as? [Any])?.count, 0, "the answered prompt is closed: \(left)")

        assertAllowedByDecision(try askerQuery(s), "the app's QUERY after DECIDE")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), ["asker": ["WWAN": "allow"]])
        let text = try String(contentsOfFile: s.decisionsFile, encoding: .utf8)
        XCTAssertTrue(text.contains("[App asker]\nWWAN=allow\n"), text)

        // SIGTERM: the agent is told; the decision survives the restart.
        stopDaemon(s.daemon)
        let rest = try agent.objects(until: "the stopping event") { $0["event"] as? String == "stopping" }
        XCTAssertEqual(rest.count, 1, "nothing but the stopping event: \(rest)")
        agent.close()
        let second = try startDaemon(in: s.ns, socket: s.socket, config: s.config, logName: "second.log")
        try waitForLinks(s.socket, "wwan0 is usable after the restart") { $0[name: "wwan0"]?.usable == true }
        assertAllowedByDecision(try askerQuery(s), "the app's QUERY after the restart")

        // FORGET: back to waiting for a decision, and off the disk.
        let forgot = try request(s.socket, "FORGET asker")
        XCTAssertEqual(try JSONValue.bool(forgot, "ok"), true, "\(forgot)")
        XCTAssertEqual(try JSONValue.bool(forgot, "forgotten"), true, "\(forgot)")
        XCTAssertEqual(forgot["app"] as? String, "asker", "\(forgot)")
        XCTAssertTrue(forgot["kind"] is NSNull, "\(forgot)")
        assertUnasked(try askerQuery(s), "the app's QUERY after FORGET (the agent has gone)")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), [:], "FORGET removed it from the file")
        let again = try request(s.socket, "FORGET asker")
        XCTAssertEqual(try JSONValue.bool(again, "forgotten"), false, "nothing left to forget: \(again)")
        XCTAssertTrue(second.isRunning)
    }

    // MARK: - Expiry

    func testUnansweredPromptsExpireAndStoreNothing() throws {
        let s = try makeSetup(promptTimeout: 2)

        // No agent (a subscriber of apps is not one): no prompt at all.
        let monitor = try LiveConnection(path: s.socket)
        addTeardownBlock { monitor.close() }
        try monitor.subscribe("apps")
        assertUnasked(try askerQuery(s), "QUERY with no agent")
        let none = try request(s.socket, "PROMPTS")
        XCTAssertEqual((none["prompts"] as? [Any])?.count, 0, "with no agent no prompt is open: \(none)")
        XCTAssertNil(try Self.parseDecisions(s.decisionsFile), "nothing is stored")
        let (monitorSaw, _) = try monitor.request("PING")
        XCTAssertTrue(monitorSaw.isEmpty, "a subscriber of apps hears nothing of prompts: \(monitorSaw)")

        // An agent that does not answer: the prompt expires after PromptTimeoutSec=2. Its arrival changes the
        // app's verdict from a deny to awaiting a decision, which the subscriber of apps hears.
        let agent = try LiveConnection(path: s.socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("prompts")
        let (heard, _) = try monitor.request("PING")
        XCTAssertEqual(heard.filter { $0["app"] as? String == "asker" }.map { $0["reason"] as? String },
                       ["awaiting-decision"], "\(heard)")
        let asked = monotonicNow()
        let app = try runningAsker(s)
        assertAwaiting(try app.ask("QUERY"), "QUERY with a silent agent")
        let raised = try agent.objects(until: "a prompt") { $0["event"] as? String == "prompt" }
        let id = try JSONValue.int(try XCTUnwrap(raised.last), "id")
        let expiry = try agent.objects(until: "prompt-expired", timeout: 8) { $0["event"] as? String != nil }
        let elapsed = monotonicNow() - asked
        let expired = try XCTUnwrap(expiry.last)
        XCTAssertEqual(expired["event"] as? String, "prompt-expired", "the next event: \(expiry)")
        XCTAssertEqual(try JSONValue.int(expired, "id"), id, "\(expired)")
        XCTAssertEqual(expired["app"] as? String, "asker", "\(expired)")
        XCTAssertEqual(expired["kind"] as? String, "wwan", "\(expired)")
        XCTAssertGreaterThanOrEqual(elapsed, 1.95, "expired before PromptTimeoutSec=2 passed")
        XCTAssertLessThan(elapsed, 5, "expired long after PromptTimeoutSec=2")

        // Nothing stored, no lasting deny, nothing open; the next QUERY asks again.
        let after = try request(s.socket, "PROMPTS")
        XCTAssertEqual((after["prompts"] as? [Any])?.count, 0, "\(after)")
        XCTAssertNil(try Self.parseDecisions(s.decisionsFile), "expiry stores nothing")
        assertAwaiting(try app.ask("QUERY"), "QUERY after the expiry")
        let again = try agent.objects(until: "a new prompt") { $0["event"] as? String != nil }
        let next = try XCTUnwrap(again.last)
        XCTAssertEqual(next["event"] as? String, "prompt", "\(again)")
        XCTAssertEqual(next["app"] as? String, "asker", "\(next)")
        XCTAssertNotEqual(try JSONValue.int(next, "id"), id, "a new prompt has a new id: \(next)")
    }

    // MARK: - No agent (a device without a screen)

    /// With no agent an undecided `ask` is denied at once (as polkit denies without an authentication agent),
    /// the log says so once per app and kind however often the app asks, and an agent arriving turns it back
    /// into a prompt for an app that is still waiting for itself.
    func testWithNoAgentAskIsDeniedLoggedOnceAndAnArrivingAgentIsAsked() throws {
        let s = try makeSetup()
        let told = "asker may not use wwan, which its policy sets to ask: no agent is listening"
        for i in 1...5 { assertUnasked(try askerQuery(s), "QUERY \(i) with no agent") }
        XCTAssertEqual(s.daemon.log.components(separatedBy: told).count - 1, 1,
                       "told once, not at every QUERY:\n\(s.daemon.logTail)")
        XCTAssertEqual(try JSONValue.int(request(s.socket, "STATUS"), "agents"), 0)

        // The app waits for itself (no time-out) through its own socat, kept open.
        let input = try Subprocess.makePipe()
        let output = try Subprocess.makePipe()
        let waiter = try Subprocess.spawn([s.asker, "-t", "60", "-", "UNIX-CONNECT:\(s.socket)"], stdin: .fd(input.read),
                                          stdout: .fd(output.write), stderr: .devNull)
        close(input.read)
        close(output.write)
        addTeardownBlock {
            close(input.write)
            waiter.killAndReap()
            close(output.read)
        }
        try writeText(toFD: input.write, "WAIT\n")
        try waitUntil("the daemon holds the app's WAIT") {
            (s.daemon.log.contains("waits for its own app asker"), s.daemon.logTail)
        }

        // An agent arrives: the waiting app is asked about at once (the open prompt is in the agent's snapshot);
        // the answer ends its WAIT.
        let agent = try LiveConnection(path: s.socket)
        addTeardownBlock { agent.close() }
        let (_, snapshot) = try agent.subscribe("prompts")
        let prompt = try XCTUnwrap((snapshot["prompts"] as? [[String: Any]])?.first, "\(snapshot)")
        XCTAssertEqual(prompt["app"] as? String, "asker", "\(prompt)")
        XCTAssertEqual(prompt["kind"] as? String, "wwan", "\(prompt)")
        XCTAssertEqual(try JSONValue.int(request(s.socket, "STATUS"), "agents"), 1)
        XCTAssertEqual(try request(s.socket, "DECIDE asker wwan allow --once")["ok"] as? Bool, true)
        let replies = FDLineReader(fd: output.read)
        let done = try JSONValue.object(try XCTUnwrap(replies.nextLine(timeout: 5), "the WAIT reply"))
        XCTAssertEqual(done["reason"] as? String, "ok", "\(done)")
        XCTAssertEqual(Self.field(done, "sources", "wwan"), "once", "\(done)")

        // The agent leaves and the decision is forgotten: denied again, and told again (a new agentless spell).
        agent.close()
        try waitUntil("the daemon has no agent") {
            let st = try request(s.socket, "STATUS")
            return ((try? JSONValue.int(st, "agents")) == 0, "\(st)")
        }
        XCTAssertEqual(try request(s.socket, "FORGET asker")["ok"] as? Bool, true)
        assertUnasked(try askerQuery(s), "QUERY after the agent left")
        XCTAssertEqual(s.daemon.log.components(separatedBy: told).count - 1, 2, s.daemon.logTail)
    }

    // MARK: - Privilege

    /// `[Defaults] UserDecisions=no`: only root and the admin group decide, list prompts or are agents.
    func testWithoutUserDecisionsUnprivilegedClientsMayNotDecideForgetListOrBeAgents() throws {
        let s = try makeSetup(userDecisions: false)
        let requests = ["QUERY", "DECIDE asker wwan allow", "DECIDE asker wwan deny --once", "FORGET asker",
                        "FORGET asker wwan", "PROMPTS", "ANSWER 1 allow", "DECISIONS", "SUBSCRIBE prompts",
                        "SUBSCRIBE apps prompts"]
        let r = try asNobody(["socat", "-", "UNIX-CONNECT:\(s.socket)"],
                             input: requests.map { $0 + "\n" }.joined())
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.lines.count, requests.count, r.summary)
        guard r.lines.count == requests.count else { return }
        let query = try JSONValue.object(r.lines[0])
        XCTAssertEqual(try JSONValue.bool(query, "ok"), true, "nobody may ask about itself: \(query)")
        XCTAssertEqual((query["identity"] as? [String: Any]).flatMap { try? JSONValue.int($0, "uid") }, 65534,
                       "the daemon sees uid 65534: \(query)")
        for (request, line) in zip(requests, r.lines).dropFirst() {
            let o = try JSONValue.object(line)
            XCTAssertEqual(try JSONValue.bool(o, "ok"), false, "\(request) as nobody: \(line)")
            XCTAssertEqual(o["error"] as? String, "permission-denied", "\(request) as nobody: \(line)")
        }
        XCTAssertNil(try Self.parseDecisions(s.decisionsFile), "nothing was stored")
        assertUnasked(try askerQuery(s), "QUERY after nobody's attempts")
    }

    /// With user decisions (the default), nobody decides for nobody's own processes: stored as its own, never
    /// reaching root's asker of the same app; nobody's FORGET forgets its own only.
    func testAUsersDecisionIsForTheirOwnProcessesOnly() throws {
        let s = try makeSetup()
        let r = try asNobody(["socat", "-", "UNIX-CONNECT:\(s.socket)"],
                             input: "DECIDE asker wwan allow\nDECISIONS\nPROMPTS\n")
        XCTAssertEqual(r.lines.count, 3, r.summary)
        let decided = try JSONValue.object(r.lines.first ?? "")
        XCTAssertEqual((decided["decided"] as? [String: Any])?["for_uid"] as? Int, 65534, "\(decided)")
        let listed = try JSONValue.object(r.lines.dropFirst().first ?? "")
        XCTAssertEqual((listed["decisions"] as? [[String: Any]])?.count, 1, "\(listed)")
        let text = try String(contentsOfFile: s.decisionsFile, encoding: .utf8)
        XCTAssertTrue(text.contains("[User 65534 asker]\nWWAN=allow\n"), text)
        // Root's process of the same app (the test's own asker) is still undecided.
        assertUnasked(try askerQuery(s), "root's asker")
        let root = try request(s.socket, "DECISIONS")
        XCTAssertEqual((root["decisions"] as? [[String: Any]])?.first?["for_uid"] as? Int, 65534, "\(root)")
        let forgot = try asNobody(["socat", "-", "UNIX-CONNECT:\(s.socket)"], input: "FORGET asker\n")
        XCTAssertTrue(forgot.stdout.contains("\"forgotten\":true"), forgot.summary)
        XCTAssertFalse(try String(contentsOfFile: s.decisionsFile, encoding: .utf8).contains("[User"))
    }

    // MARK: - Crash safety

    /// SIGKILL at varying moments after a DECIDE: the file is always the old set or the new one, whole, and the
    /// new one whenever the DECIDE was acknowledged.
    func testDecisionsFileIsOldOrNewAfterSigkillAtAnyMoment() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let apps = ["c1", "c2", "c3"]
        let config = try writeConfig(apps.map { "[App \($0)]\nExecutable=/nonexistent/\($0)\nWiFi=ask\nWWAN=ask\n" }
            .joined(separator: "\n"), in: dir)
        let socket = dir + "/netpermd.sock"
        let stateDir = dir + "/state"
        let file = stateDir + "/decisions.conf"
        let logPath = dir + "/crash.log"
        final class Slot: @unchecked Sendable { var daemon: DaemonProcess? }
        let slot = Slot()
        addTeardownBlock { slot.daemon?.forceStop() }
        func logTail() -> String {
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            return "\n--- netpermd logs ---\n" + log.suffix(4000)
        }
        func corruptFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: stateDir)) ?? []).filter { $0.contains(".corrupt-") }
        }
        func start() throws -> DaemonProcess {
            let d = try DaemonProcess(binary: netpermd, namespace: ns.name, socketPath: socket, configPath: config,
                                      stateDir: stateDir, logPath: logPath)
            slot.daemon = d
            try waitUntilAnswering(d)
            return d
        }

        let began = monotonicNow()
        // How long a DECIDE takes here (two fsyncs: from well under a millisecond on tmpfs to tens on a disk), so
        // that the kills below land before, during and after the write.
        var current: [String: [String: String]] = [:]
        let first = try start()
        var latencies: [Double] = []
        for (i, value) in ["allow", "deny", "allow"].enumerated() {
            let conn = try LiveConnection(path: socket)
            let t = monotonicNow()
            let (_, reply) = try conn.request("DECIDE c1 other \(value)")
            latencies.append(monotonicNow() - t)
            conn.close()
            XCTAssertEqual(try JSONValue.bool(reply, "ok"), true, "calibration DECIDE \(i): \(reply)")
        }
        current = ["c1": ["Other": "allow"]]
        XCTAssertEqual(try Self.parseDecisions(file), current, "acknowledged decisions are on disk")
        first.forceStop()
        let latency = latencies.sorted()[1]

        var outcomes = (old: 0, new: 0, acknowledged: 0)
        for i in 0..<30 {
            let d = try start()
            XCTAssertEqual(corruptFiles(), [], "iteration \(i): the daemon set the decisions file aside\(logTail())")
            let app = apps[i % apps.count]
            let (key, kind) = i % 2 == 0 ? ("WWAN", "wwan") : ("WiFi", "wifi")
            let value = current[app]?[key] == "allow" ? "deny" : "allow"
            var next = current
            next[app, default: [:]][key] = value

            let conn = try LiveConnection(path: socket)
            try conn.send("DECIDE \(app) \(kind) \(value)")
            // 0 to 2.5 times the latency, in a scrambled order: before, during and after the write and the reply.
            let delay = UInt32(Double((i * 7) % 30) / 29 * 2.5 * latency * 1e6)
            if delay > 0 { usleep(delay) }   // the point of the test: a kill at varying moments, not a wait
            d.signal(SIGKILL)
            XCTAssertEqual(d.waitForExit(timeout: 5), 128 + SIGKILL, "iteration \(i)")
            let replies = conn.reader.drainToEOF(timeout: 2)
            conn.close()
            let acknowledged = replies.contains {
                (try? JSONValue.object($0)).flatMap { try? JSONValue.bool($0, "ok") } == true
            }

            let onDisk: [String: [String: String]]
            do {
                onDisk = try Self.parseDecisions(file) ?? [:]
            } catch {
                XCTFail("iteration \(i) (kill \(delay) µs after DECIDE): \(error)\(logTail())")
                return
            }
            if acknowledged {
                outcomes.acknowledged += 1
                XCTAssertEqual(onDisk, next, "iteration \(i): an acknowledged DECIDE must be on disk\(logTail())")
            } else {
                XCTAssertTrue(onDisk == current || onDisk == next,
                              "iteration \(i) (kill \(delay) µs after DECIDE \(app) \(kind) \(value)): the file is "
                                + "neither the old set \(current) nor the new one \(next): \(onDisk)\(logTail())")
            }
            if onDisk == next { outcomes.new += 1 } else { outcomes.old += 1 }
            current = onDisk
        }

        // The last daemon loads what is on disk: no file set aside, and its verdicts use exactly those decisions.
        let last = try start()
        XCTAssertEqual(corruptFiles(), [], "the last start set the decisions file aside\(logTail())")
        for app in apps {
            let v = try request(socket, "QUERY \(app)")
            for (key, kind) in [("WWAN", "wwan"), ("WiFi", "wifi")] {
                // No agent listens here, so a kind no kill left decided is the policy's ask denied as no-agent.
                let expected = current[app]?[key]
                XCTAssertEqual(Self.field(v, "permissions", kind), expected ?? "deny", "\(app) \(kind): \(v)")
                XCTAssertEqual(Self.field(v, "sources", kind), expected == nil ? "no-agent" : "decision",
                               "\(app): \(v)")
            }
        }
        stopDaemon(last)
        print("crash safety: 30 kills in \(String(format: "%.1f", monotonicNow() - began)) s, DECIDE latency "
            + "\(String(format: "%.1f", latency * 1000)) ms; file old \(outcomes.old), "
            + "new \(outcomes.new), acknowledged \(outcomes.acknowledged)")
    }

    // MARK: - netpermctl

    func testNetpermctlAgentDecideForgetAndPrompts() throws {
        let s = try makeSetup()
        let stdin = try Subprocess.makePipe()
        let stdout = try Subprocess.makePipe()
        let agent = try Subprocess.spawn([netpermctl, "--socket", s.socket, "agent"], stdin: .fd(stdin.read),
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
        // Printed once its SUBSCRIBE was acknowledged: from then on the daemon has an agent.
        try out.waitForText("waiting for prompts")

        let app = try runningAsker(s)
        assertAwaiting(try app.ask("QUERY"), "QUERY with netpermctl agent running")
        try out.waitForText("[s] skip")
        let first = try XCTUnwrap((try request(s.socket, "PROMPTS")["prompts"] as? [[String: Any]])?.first?["id"] as? Int)
        XCTAssertTrue(out.allText.contains("prompt \(first): asker (\(s.asker), run by root) asks to use cellular data via wwan0 (cellular, metered).\n"
            + "  [y] Allow  [n] Wi-Fi only  [o] Allow once (until netpermd restarts or its policy changes)  [s] skip (ask "
            + "again later, it expires within 30 s): "), out.allText)
        // One key, no Enter.
        try writeText(toFD: stdin.write, "y")
        try out.waitForText("asker: Allow (cellular data allowed, for everyone)")
        assertAllowedByDecision(try askerQuery(s), "QUERY after the agent said y")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), ["asker": ["WWAN": "allow"]])

        let header = ["ID", "APP", "KIND", "LINK", "EXECUTABLE", "UNIT", "UID"]
        let noneOpen = try ctl(["--socket", s.socket, "prompts"])
        XCTAssertEqual(noneOpen.status, 0, noneOpen.summary)
        XCTAssertEqual(noneOpen.lines.map { $0.split(separator: " ").map(String.init) }, [header], noneOpen.summary)

        let deny = try ctl(["--socket", s.socket, "decide", "asker", "wwan", "deny"])
        XCTAssertEqual(deny.status, 0, deny.summary)
        XCTAssertTrue(deny.stdout.contains("asker: wwan deny (stored)"), deny.summary)
        let denied = try askerQuery(s)
        XCTAssertEqual(denied["reason"] as? String, "denied", "\(denied)")
        XCTAssertEqual(denied["denied_kinds"] as? [String], ["wwan"], "\(denied)")
        XCTAssertEqual(Self.field(denied, "sources", "wwan"), "decision", "\(denied)")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), ["asker": ["WWAN": "deny"]])

        let forget = try ctl(["--socket", s.socket, "forget", "asker"])
        XCTAssertEqual(forget.status, 0, forget.summary)
        XCTAssertEqual(forget.stdout, "forgotten\n", forget.summary)
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), [:])

        // Undecided again: the app's next QUERY asks the agent again; `prompts` shows the open prompt meanwhile.
        assertAwaiting(try app.ask("QUERY"), "QUERY after forget")
        try out.waitForText("[s] skip", count: 2)
        let oneOpen = try ctl(["--socket", s.socket, "prompts"])
        XCTAssertEqual(oneOpen.status, 0, oneOpen.summary)
        XCTAssertEqual(oneOpen.lines.count, 2, oneOpen.summary)
        let row = oneOpen.lines.dropFirst().first.map { $0.components(separatedBy: "  ").map {
            $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } } ?? []
        XCTAssertEqual(Array(row.dropFirst()), ["asker", "wwan", "wwan0 (metered)", s.asker, "-", "0"], oneOpen.summary)
        let second = try XCTUnwrap(Int(row.first ?? ""), oneOpen.summary)
        XCTAssertNotEqual(second, first)
        try writeText(toFD: stdin.write, "s")
        try out.waitForText("skipped: prompt \(second) stays open until it expires")
        XCTAssertNil(try Self.parseDecisions(s.decisionsFile)?["asker"], "skipping stores nothing")

        let nothing = try ctl(["--socket", s.socket, "forget", "asker"])
        XCTAssertEqual(nothing.status, 0, nothing.summary)
        XCTAssertEqual(nothing.stdout, "no stored decision to forget\n", nothing.summary)

        // As nobody (user decisions on): root's open prompt is not its to see, its decision is its own.
        let theirs = try asNobody([netpermctl, "--socket", s.socket, "-t", "prompts"])
        XCTAssertEqual(theirs.status, 0, theirs.summary)
        XCTAssertEqual(theirs.stdout, "", "nobody sees none of root's prompts: \(theirs.summary)")
        XCTAssertEqual(try request(s.socket, "PROMPTS")["prompts"].map { ($0 as? [Any])?.count }, 1, "root's is open")
        let own = try asNobody([netpermctl, "--socket", s.socket, "decide", "asker", "wwan", "allow"])
        XCTAssertTrue(own.stdout.contains("asker: wwan allow (stored) for uid 65534's own processes"), own.summary)
        XCTAssertTrue(try String(contentsOfFile: s.decisionsFile, encoding: .utf8).contains("[User 65534 asker]\nWWAN=allow\n"))
        XCTAssertEqual(try asNobody([netpermctl, "--socket", s.socket, "forget", "asker"]).stdout, "forgotten\n")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), [:], "nothing of nobody's is left")
        XCTAssertTrue(agent.isRunning, "the agent keeps running: \(out.allText)")

        // Its input ends while no prompt is open: an agent that can no longer answer leaves at once, rather than
        // at the next prompt, which the daemon would hold for it until PromptTimeoutSec.
        close(stdin.write)
        stdinOpen = false
        try out.waitForText("end of input")
        XCTAssertEqual(agent.wait(timeout: 10), 0, out.allText)
    }

    /// A prompt raised while the agent waits for the answer to another is asked next. The agent used to read past
    /// it while waiting for its DECIDE's reply, and it was never asked.
    /// The daemon holds a pidfd per process that asked an open prompt, at a number no select(2) needs (libnftables
    /// waits with select: LowDescriptors), and closes it once the process has exited and the prompt is withdrawn.
    func testAnAskersPidfdIsHeldAboveSelectsNumbersAndClosedWithItsPrompt() throws {
        let s = try makeSetup()
        let agent = try LiveConnection(path: s.socket)
        addTeardownBlock { agent.close() }
        try agent.subscribe("prompts")
        func pidfds() -> [Int32] {
            let dir = "/proc/\(s.daemon.pid)/fd"
            return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).compactMap { n in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + n)) == "anon_inode:[pidfd]" ? Int32(n) : nil
            }
        }
        XCTAssertEqual(pidfds(), [])
        let app = try runningAsker(s)
        assertAwaiting(try app.ask("QUERY"), "the app asks")
        _ = try agent.objects(until: "its prompt") { $0["event"] as? String == "prompt" }
        try waitUntil("the daemon watches the asker") { (pidfds().count == 1, "\(pidfds())") }
        XCTAssertGreaterThanOrEqual(pidfds().first ?? 0, 1024, "above FD_SETSIZE")
        app.close()
        _ = try agent.objects(until: "the prompt withdrawn") { $0["event"] as? String == "prompt-withdrawn" }
        try waitUntil("the pidfd is closed") { (pidfds().isEmpty, "\(pidfds())") }
    }

    func testAgentAsksAPromptThatCameWhileAnotherWasOpen() throws {
        let s = try makeSetup(secondApp: true)
        let stdin = try Subprocess.makePipe()
        let stdout = try Subprocess.makePipe()
        let agent = try Subprocess.spawn([netpermctl, "--socket", s.socket, "agent"], stdin: .fd(stdin.read),
                                         stdout: .fd(stdout.write), stderr: .fd(stdout.write))
        close(stdin.read)
        close(stdout.write)
        let out = FDLineReader(fd: stdout.read)
        addTeardownBlock {
            close(stdin.write)
            agent.killAndReap()
            close(stdout.read)
        }
        try out.waitForText("waiting for prompts")
        let first = try runningAsker(s)
        assertAwaiting(try first.ask("QUERY"), "the first app asks")
        try out.waitForText("[s] skip")
        // The second asks while the agent waits for the first answer.
        let second = try runningAsker(s, s.dir + "/asker2-socat")
        XCTAssertEqual(try second.ask("QUERY")["reason"] as? String, "awaiting-decision")
        try waitUntil("two prompts open") {
            let p = try self.request(s.socket, "PROMPTS")
            return ((p["prompts"] as? [Any])?.count == 2, "\(p)")
        }
        try writeText(toFD: stdin.write, "y\n")
        try out.waitForText("asker: Allow")
        try out.waitForText("[s] skip", count: 2)
        XCTAssertTrue(out.allText.contains("asker2 ("), out.allText)
        try writeText(toFD: stdin.write, "y\n")
        try out.waitForText("asker2: Allow")
        XCTAssertEqual(try Self.parseDecisions(s.decisionsFile), ["asker": ["WWAN": "allow"], "asker2": ["WWAN": "allow"]])
    }
}
