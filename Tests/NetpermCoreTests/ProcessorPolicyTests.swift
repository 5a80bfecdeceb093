import NetpermCore
import XCTest

/// The verbs that involve the policy and the caller's identity: QUERY, APPS, RELOAD, SUBSCRIBE, WAIT, STATUS.
final class ProcessorPolicyTests: XCTestCase {
    private let policy = """
    [App curl]
    Executable=/usr/bin/curl
    WWAN=allow
    [App backup]
    Unit=backup.service
    WWAN=deny
    WiFi=deny
    """

    private let wwan = makeLink(4, "wwan0", .wwan, metric: 700)
    private let eth = makeLink(2, "enp3s0", .ethernet, metric: 100)

    /// With an agent listening (so `ask` prompts) unless `agents` says otherwise.
    private func state(_ links: [Link]? = nil, ready: Bool = true, agents: Int = 1) throws -> DaemonState {
        var s = DaemonState(ready: ready, network: NetworkState(links: links ?? [wwan]), config: try parsePolicy(policy),
                            policyGeneration: 1)
        s.agents = agents
        return s
    }

    /// curl run by an ordinary user (not in group netperm, gid 990).
    private func user(_ s: DaemonState) -> Caller {
        Caller(identity: makePeer(uid: 1000, gids: [1000, 100], exe: "/usr/bin/curl"), config: s.config,
               adminGID: { 990 })
    }

    /// A member of the admin group, running something no [App] names.
    private func admin(_ s: DaemonState) -> Caller {
        Caller(identity: makePeer(uid: 1001, gids: [1001, 990], exe: "/usr/bin/netpermctl", pid: 77),
               config: s.config, adminGID: { 990 })
    }

    private func run(_ line: String, _ s: DaemonState, _ caller: Caller) throws -> Response {
        try XCTUnwrap(Processor.handle(.line(Array(line.utf8)), state: s, caller: caller), line)
    }

    private func assertError(_ r: Response, _ code: ErrorCode, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.json["ok"], false, file: file, line: line)
        XCTAssertEqual(r.json["error"], .string(code.rawValue), "\(r.json.encoded())", file: file, line: line)
        XCTAssertNotNil(r.json["message"]?.stringValue, file: file, line: line)
        XCTAssertNil(r.action, file: file, line: line)
        XCTAssertFalse(r.close, file: file, line: line)
    }

    // MARK: QUERY

    func testQueryOwnAppHasIdentity() throws {
        let s = try state()
        let c = user(s)
        XCTAssertEqual(c.match.id, "curl")
        XCTAssertFalse(c.privileged)
        for line in ["QUERY", "query curl"] {
            let r = try run(line, s, c)
            XCTAssertEqual(r.json["ok"], true, line)
            XCTAssertEqual(r.json["app"], "curl", line)
            XCTAssertEqual(r.json["matched_by"], "executable", line)
            XCTAssertEqual(r.json["available"], true, line)
            XCTAssertEqual(r.json["reason"], "ok", line)
            XCTAssertEqual(r.json["via"]?["name"], "wwan0", line)
            XCTAssertEqual(r.json["permissions"]?["wwan"], "allow", line)
            XCTAssertEqual(r.json["identity"]?["pid"], 4242, line)
            XCTAssertEqual(r.json["identity"]?["uid"], 1000, line)
            XCTAssertEqual(r.json["identity"]?["executable"], "/usr/bin/curl", line)
            XCTAssertEqual(r.json["identity"]?["unit"], .null, line)
            XCTAssertNil(r.action)
        }
    }

    /// An app no section names is still answered, under its derived id, with [Defaults] (WWAN=ask).
    func testQueryUnnamedApp() throws {
        let s = try state()
        let r = try run("QUERY", s, admin(s))
        XCTAssertEqual(r.json["app"], "netpermctl")
        XCTAssertEqual(r.json["matched_by"], "default")
        XCTAssertEqual(r.json["available"], false)
        XCTAssertEqual(r.json["reason"], "awaiting-decision")
        XCTAssertEqual(r.json["pending_kinds"], .array(["wwan"]))
        XCTAssertEqual(r.json["identity"]?["pid"], 77)
        // Asking about yourself while awaiting a decision raises prompts.
        XCTAssertEqual(r.action, .ask(s.verdict(for: admin(s).match)))
    }

    /// No agent listens: nobody can be asked, so an undecided `ask` is a deny that says why (`no-agent`), and
    /// the app asking about itself still makes the daemon say so (the `ask` action, which logs).
    func testQueryWithNoAgentDeniesUndecidedAskAndSaysWhy() throws {
        let s = try state(agents: 0)
        let r = try run("QUERY", s, admin(s))
        XCTAssertEqual(r.json["available"], false)
        XCTAssertEqual(r.json["reason"], "denied")
        XCTAssertEqual(r.json["denied_kinds"], .array(["wwan"]))
        XCTAssertEqual(r.json["pending_kinds"], .array([]))
        XCTAssertEqual(r.json["permissions"]?["wwan"], "deny")
        XCTAssertEqual(r.json["sources"]?["wwan"], "no-agent")
        XCTAssertEqual(r.json["sources"]?["wifi"], "policy")
        let v = s.verdict(for: admin(s).match)
        XCTAssertEqual(v.unaskedKinds, [.wwan])
        XCTAssertEqual(r.action, .ask(v))
        // A decision still counts: it is not an `ask` any more.
        var decided = s
        decided.decisions.set("netpermctl", .wwan, .allow, once: false)
        let d = try run("QUERY", decided, admin(decided))
        XCTAssertEqual(d.json["reason"], "ok")
        XCTAssertEqual(d.json["sources"]?["wwan"], "decision")
        XCTAssertNil(d.action)
        // An explicit deny in the policy is not "unasked": nothing to say.
        let backup = try run("QUERY", s, Caller(identity: makePeer(uid: 5, gids: [5], exe: nil, unit: "backup.service"),
                                                config: s.config, adminGID: { nil }))
        XCTAssertEqual(backup.json["sources"]?["wwan"], "policy")
        XCTAssertNil(backup.action)
        XCTAssertEqual(try run("STATUS", s, admin(s)).json["agents"], 0)
        XCTAssertEqual(try run("STATUS", try state(), admin(s)).json["agents"], 1)
    }

    /// Naming another app that awaits a decision does not prompt (only the app itself asking does).
    func testQueryOtherAwaitingAppDoesNotAsk() throws {
        var s = try state()
        s.config = try parsePolicy(policy + "\n[App modem]\nUser=7\n")
        let r = try run("QUERY modem", s, admin(s))
        XCTAssertEqual(r.json["reason"], "awaiting-decision")
        XCTAssertNil(r.action)
        // Not awaiting: no ask either.
        XCTAssertNil(try run("QUERY", s, user(s)).action)
        XCTAssertNil(try run("QUERY", try state([]), user(s)).action)
    }

    func testQueryOtherAppUnprivilegedIsDenied() throws {
        let s = try state()
        let r = try run("QUERY backup", s, user(s))
        assertError(r, .permissionDenied)
        let message = r.json["message"]?.stringValue ?? ""
        XCTAssertTrue(message.contains("'netperm'"), message)
        XCTAssertTrue(message.contains("(curl)"), message)
        XCTAssertNil(r.json["available"])
        // Whether an app exists is not revealed either.
        assertError(try run("QUERY nosuch", s, user(s)), .permissionDenied)
    }

    func testQueryOtherAppPrivileged() throws {
        let s = try state()
        for caller in [admin(s), Caller(identity: makePeer(uid: 0, gids: [0], exe: "/usr/bin/curl"), config: s.config,
                                                     adminGID: { nil })] {
            XCTAssertTrue(caller.privileged)
            let r = try run("QUERY backup", s, caller)
            XCTAssertEqual(r.json["ok"], true)
            XCTAssertEqual(r.json["app"], "backup")
            XCTAssertEqual(r.json["matched_by"], "name")
            XCTAssertEqual(r.json["available"], false)
            XCTAssertEqual(r.json["reason"], "denied")
            XCTAssertEqual(r.json["denied_kinds"], .array(["wwan"]))
            XCTAssertNil(r.json["identity"], "someone else's app: no caller identity")
        }
    }

    func testQueryUnknownAppPrivilegedIsNotFound() throws {
        let s = try state()
        let r = try run("QUERY nosuch", s, admin(s))
        assertError(r, .notFound)
        XCTAssertEqual(r.json["message"], "no [App nosuch] in the policy")
    }

    func testQueryTooManyArguments() throws {
        let s = try state()
        let r = try run("QUERY curl backup", s, admin(s))
        assertError(r, .badArguments)
        XCTAssertEqual(r.json["message"], "usage: QUERY [APP]")
    }

    func testQueryBeforeReady() throws {
        let s = try state(ready: false)
        let r = try run("QUERY", s, user(s))
        XCTAssertEqual(r.json["ok"], true)
        XCTAssertEqual(r.json["reason"], "starting")
        XCTAssertEqual(r.json["available"], false)
    }

    // MARK: APPS and RELOAD

    func testAppsIsPrivileged() throws {
        let s = try state()
        let denied = try run("APPS", s, user(s))
        assertError(denied, .permissionDenied)
        XCTAssertEqual(denied.json["message"], "APPS needs root or membership of group 'netperm'")

        let r = try run("APPS", s, admin(s))
        XCTAssertEqual(r.json["ok"], true)
        let apps = try XCTUnwrap(r.json["apps"]?.arrayValue)
        XCTAssertEqual(apps.map { $0["app"] }, ["curl", "backup"])
        XCTAssertEqual(apps.map { $0["matched_by"] }, ["name", "name"])
        XCTAssertEqual(apps.map { $0["available"] }, [true, false])
    }

    func testReloadIsPrivileged() throws {
        let s = try state()
        let denied = try run("RELOAD", s, user(s))
        assertError(denied, .permissionDenied)
        XCTAssertEqual(denied.json["message"], "RELOAD needs root or membership of group 'netperm'")

        let r = try run("reload", s, admin(s))
        XCTAssertEqual(r.action, .reload)
        XCTAssertFalse(r.close)
        assertError(try run("RELOAD now", s, admin(s)), .badArguments)
    }

    func testReloadReply() throws {
        let s = try state()
        let good = Processor.reloadReply(state: s, error: nil)
        XCTAssertEqual(good.json.encoded(), #"{"ok":true,"generation":1,"apps":2}"#)
        let bad = Processor.reloadReply(state: s, error: "/etc/netpermd/netpermd.conf:2: boom")
        assertError(bad, .policyInvalid)
        XCTAssertEqual(bad.json["message"], "/etc/netpermd/netpermd.conf:2: boom")
    }

    // MARK: SUBSCRIBE

    func testSubscribeAll() throws {
        let s = try state()
        let r = try run("SUBSCRIBE", s, user(s))
        XCTAssertEqual(r.json.encoded(), #"{"ok":true,"subscribed":["links","apps","policy"],"app":"curl","privileged":false}"#)
        XCTAssertEqual(r.action, .subscribe([.links, .apps, .policy]))
        XCTAssertFalse(r.close)

        let p = try run("SUBSCRIBE", s, admin(s))
        XCTAssertEqual(p.json["privileged"], true)
        XCTAssertEqual(p.json["app"], "netpermctl")
    }

    func testSubscribeTopics() throws {
        let s = try state()
        let r = try run("subscribe policy LINKS", s, user(s))
        XCTAssertEqual(r.json["subscribed"], .array(["links", "policy"]))
        XCTAssertEqual(r.action, .subscribe([.links, .policy]))

        let bad = try run("SUBSCRIBE links bogus", s, user(s))
        assertError(bad, .badArguments)
        XCTAssertEqual(bad.json["message"], "unknown topic 'bogus' (expected links, apps, policy, prompts)")
        assertError(try run("SUBSCRIBE links apps policy links apps", s, user(s)), .badArguments)
    }

    /// Prompts are for agents: privileged only, and never part of a plain SUBSCRIBE.
    func testSubscribePrompts() throws {
        let s = try state()
        let denied = try run("SUBSCRIBE prompts", s, user(s))
        assertError(denied, .permissionDenied)
        XCTAssertEqual(denied.json["message"], "only root or members of group 'netperm' may subscribe to prompts")
        assertError(try run("SUBSCRIBE apps PROMPTS", s, user(s)), .permissionDenied)
        let agent = try run("SUBSCRIBE apps prompts", s, admin(s))
        XCTAssertEqual(agent.json["subscribed"], .array(["apps", "prompts"]))
        XCTAssertEqual(agent.action, .subscribe([.apps, .prompts]))
        XCTAssertEqual(try run("SUBSCRIBE", s, admin(s)).action, .subscribe([.links, .apps, .policy]))
    }

    // MARK: WAIT

    func testWaitAlreadyAvailableRepliesNow() throws {
        let s = try state()
        for line in ["WAIT", "WAIT 5", "WAIT curl", "WAIT curl 0.5"] {
            let r = try run(line, s, user(s))
            XCTAssertNil(r.action, line)
            XCTAssertFalse(r.hold, line)
            XCTAssertEqual(r.json["ok"], true, line)
            XCTAssertEqual(r.json["app"], "curl", line)
            XCTAssertEqual(r.json["available"], true, line)
            XCTAssertEqual(r.json["via"]?["name"], "wwan0", line)
        }
        // A named app that is available: also right away.
        let named = try run("WAIT backup 3", try state([eth]), admin(try state([eth])))
        XCTAssertNil(named.action)
        XCTAssertEqual(named.json["app"], "backup")
        XCTAssertEqual(named.json["matched_by"], "name")
        XCTAssertEqual(named.json["via"]?["name"], "enp3s0")
    }

    func testWaitForSelf() throws {
        let s = try state([])
        let c = user(s)
        XCTAssertEqual(try run("WAIT", s, c).action, .wait(c.match, timeoutMicroseconds: nil, own: true))
        XCTAssertEqual(try run("WAIT 5", s, c).action, .wait(c.match, timeoutMicroseconds: 5_000_000, own: true))
        XCTAssertEqual(try run("WAIT 0.5", s, c).action, .wait(c.match, timeoutMicroseconds: 500_000, own: true))
        XCTAssertEqual(try run("WAIT curl 1", s, c).action, .wait(c.match, timeoutMicroseconds: 1_000_000, own: true))
        XCTAssertEqual(try run("WAIT 0", s, c).action, .wait(c.match, timeoutMicroseconds: 0, own: true))
        let r = try run("WAIT 5", s, c)
        XCTAssertEqual(r.json, .null, "no reply until the daemon has one")
        XCTAssertFalse(r.close)
    }

    /// Not ready: wait, even though the links would allow it.
    func testWaitBeforeReady() throws {
        let s = try state([eth, wwan], ready: false)
        let c = user(s)
        XCTAssertEqual(try run("WAIT", s, c).action, .wait(c.match, timeoutMicroseconds: nil, own: true))
    }

    func testWaitForNamedApp() throws {
        let s = try state()
        let a = admin(s)
        let backup = AppMatch(id: "backup", matchedBy: .name, app: s.config.app(named: "backup"))
        XCTAssertEqual(try run("WAIT backup 0.5", s, a).action, .wait(backup, timeoutMicroseconds: 500_000, own: false))
        XCTAssertEqual(try run("WAIT backup", s, a).action, .wait(backup, timeoutMicroseconds: nil, own: false))
        assertError(try run("WAIT backup", s, user(s)), .permissionDenied)
        assertError(try run("WAIT backup 1", s, user(s)), .permissionDenied)
        assertError(try run("WAIT nosuch 1", s, a), .notFound)
    }

    func testWaitBadArguments() throws {
        let s = try state([])
        let a = admin(s)
        let abc = try run("WAIT backup abc", s, a)
        assertError(abc, .badArguments)
        XCTAssertEqual(abc.json["message"], "usage: WAIT [APP] [SECONDS]")
        let negative = try run("WAIT backup -1", s, a)
        assertError(negative, .badArguments)
        XCTAssertEqual(negative.json["message"], "bad time-out '-1': expected seconds, e.g. 30 or 0.5")
        assertError(try run("WAIT 1e3", s, a), .badArguments)
        assertError(try run("WAIT 5 backup", s, a), .badArguments)
        assertError(try run("WAIT backup 1 2", s, a), .badArguments)
        assertError(try run("WAIT 1 2", s, a), .badArguments)
        assertError(try run("WAIT 1 2", s, user(s)), .badArguments)
    }

    func testWaitReplies() throws {
        let s = try state([])
        let v = s.verdict(for: user(s).match)
        let timeout = Processor.waitTimeout(v)
        XCTAssertEqual(timeout["ok"], false)
        XCTAssertEqual(timeout["error"], "timeout")
        XCTAssertEqual(timeout["message"], "curl may not use the network yet: no-network")
        XCTAssertEqual(timeout["app"], "curl")
        XCTAssertEqual(timeout["reason"], "no-network")
        let done = Processor.waitDone(try state().verdict(for: user(s).match))
        XCTAssertEqual(done["ok"], true)
        XCTAssertEqual(done["available"], true)
    }

    // MARK: parseSeconds

    func testParseSeconds() {
        let table: [(String, UInt64?)] = [
            ("30", 30_000_000), ("0.5", 500_000), ("1.25", 1_250_000), (".5", 500_000), ("0", 0),
            ("5.", 5_000_000), ("0.000001", 1), ("1.1234567", 1_123_456), ("99999999", 99_999_999_000_000),
            ("", nil), ("-1", nil), ("1e3", nil), ("abc", nil), (".", nil), ("1.2.3", nil), ("+1", nil),
            (" 1", nil), ("0x10", nil), ("100000000", nil), ("nan", nil), ("inf", nil),
        ]
        for (text, expected) in table {
            XCTAssertEqual(Processor.parseSeconds(text), expected, "'\(text)'")
        }
    }

    /// Only ASCII digits are digits. A digit followed by a combining mark is one Character that sorts between
    /// "0" and "9", so a Character-range check lets it through and the fraction then silently becomes 0.
    func testParseSecondsRejectsNonASCIIDigits() {
        for text in ["1.5\u{0301}", "2\u{0301}", "1.\u{0665}", "\u{FF15}"] {
            XCTAssertNil(Processor.parseSeconds(text), "'\(text)' (\(text.unicodeScalars.map { $0.value }))")
        }
    }

    // MARK: STATUS

    func testStatusPolicy() throws {
        var s = try state()
        s.policyGeneration = 3
        s.policyError = "/etc/netpermd/netpermd.conf:9: bad"
        let r = try run("STATUS", s, user(s))
        XCTAssertEqual(r.json["policy"], .object([("generation", 3), ("apps", 2),
                                                  ("error", "/etc/netpermd/netpermd.conf:9: bad")]))
        s.policyError = nil
        XCTAssertEqual(try run("STATUS", s, user(s)).json["policy"],
                       .object([("generation", 3), ("apps", 2), ("error", .null)]))
        XCTAssertEqual(try run("STATUS", DaemonState(), user(s)).json["policy"],
                       .object([("generation", 0), ("apps", 0), ("error", .null)]))
    }
}
