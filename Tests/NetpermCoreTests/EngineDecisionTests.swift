// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// DECIDE and FORGET: who may, what they take, and when a decision takes effect: a lasting one once the store
/// says it is on disk, never before; a failed write changes nothing; decisions that come meanwhile wait their turn.
final class EngineDecisionTests: XCTestCase {
    private let policy = """
    [App maps]
    Executable=/usr/bin/maps
    [App updater]
    Executable=/usr/bin/apt-get
    WWAN=deny
    """

    private func harness(agents: Bool = false) -> EngineHarness {
        EngineHarness(policy: policy, links: [Links.wwan], agents: agents)
    }

    private func decision(_ d: Decisions?, _ app: String, _ kind: PolicyDimension) -> String? {
        d?.decision(app, kind).map { "\($0.0.rawValue) \($0.1.rawValue)" }
    }

    /// What the engine has in force now, by asking as root.
    private func source(_ h: EngineHarness, _ app: String) -> JSON? {
        let r = h.request(h.connect(), "QUERY \(app)")
        return r["sources"]?["wwan"]
    }

    /// `[Defaults] UserDecisions=no`: only root and the admin group decide (and forget, and list).
    func testPrivilegedOnlyWithoutUserDecisions() {
        let h = EngineHarness(policy: policy + "\n[Defaults]\nUserDecisions=no\n", links: [Links.wwan])
        let c = h.connect(Peers.curl)
        let why = " ([Defaults] UserDecisions=no: users do not decide for their own apps)"
        XCTAssertEqual(h.requestError(c, "DECIDE maps wwan allow", .permissionDenied),
                       "DECIDE needs root or membership of group 'netperm'" + why)
        XCTAssertEqual(h.requestError(c, "FORGET maps", .permissionDenied),
                       "FORGET needs root or membership of group 'netperm'" + why)
        XCTAssertEqual(h.requestError(c, "DECISIONS", .permissionDenied),
                       "DECISIONS needs root or membership of group 'netperm'" + why)
        XCTAssertEqual(h.request(h.connect(Peers.admin), "DECIDE maps wwan allow")["ok"], true)
    }

    /// Wrong words after a verb the caller may not use: it is told it may not, not what the words lack (the parser
    /// reads them before the engine checks access); too many words are refused first, for anyone.
    func testAccessIsCheckedBeforeTheWords() {
        let h = EngineHarness(policy: policy + "\n[Defaults]\nUserDecisions=no\n", links: [Links.wwan])
        let c = h.connect(Peers.curl)
        for line in ["DECIDE 9maps wwan allow", "DECIDE maps cable allow", "FORGET", "ANSWER x allow"] {
            XCTAssertEqual(h.request(c, line)["error"], "permission-denied", line)
            XCTAssertEqual(h.request(h.connect(Peers.admin), line)["error"], "bad-arguments", line)
        }
        XCTAssertEqual(h.requestError(c, "DECIDE a b c d e", .badArguments), "usage: \(Verb.decide.usage)")
    }

    /// A user decides for their own uid's processes only: stored as theirs, applied to their own QUERY and WAIT,
    /// never to everyone's verdict nor another uid's; a decision for everyone wins over it; FORGET and DECISIONS
    /// reach their own only.
    func testAUserDecidesForTheirOwnUidOnly() {
        let h = harness(agents: true)
        let alice = h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 600))
        let bob = h.connect(makePeer(uid: 1002, exe: "/usr/bin/maps", pid: 601))
        let r = h.request(alice, "DECIDE maps wwan allow")
        XCTAssertEqual(r["decided"]?["for_uid"], 1000)
        XCTAssertEqual(r["sources"]?["wwan"], "user-decision")
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(decision(h.persisted.last, "maps", .wwan), nil, "not for everyone")
        XCTAssertEqual(h.persisted.last?.decision("maps", .wwan, uid: 1000).map(\.1), .userDecision)
        XCTAssertEqual(h.request(alice, "QUERY")["sources"]?["wwan"], "user-decision")
        XCTAssertEqual(h.request(alice, "QUERY")["available"], true)
        XCTAssertEqual(h.request(bob, "QUERY")["reason"], "awaiting-decision", "another uid's same app is still asked")
        XCTAssertEqual(source(h, "maps"), "policy", "everyone's verdict is the policy's")
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["user_decisions"],
                       .array([.object([("app", "maps"), ("kind", "wwan"), ("decision", "allow"), ("once", false),
                                        ("for_uid", 1000)])]), "shown to the privileged as alice's own")
        XCTAssertEqual(h.request(bob, "DECISIONS")["decisions"], .array([]), "bob sees only his own")
        XCTAssertEqual(h.request(alice, "DECISIONS")["decisions"]?.arrayValue?.count, 1)
        XCTAssertEqual(h.request(bob, "FORGET maps")["forgotten"], false, "bob cannot forget alice's")
        XCTAssertEqual(h.request(h.connect(Peers.admin), "DECIDE maps wwan deny")["decided"]?["for_uid"], .null)
        let q = h.request(alice, "QUERY")
        XCTAssertEqual(q["sources"]?["wwan"], "decision", "a decision for everyone wins over a user's own")
        XCTAssertEqual(q["available"], false)
        XCTAssertEqual(h.request(h.connect(), "DECISIONS")["decisions"]?.arrayValue?.map { $0["for_uid"] }, [.null, 1000])
        XCTAssertEqual(h.request(alice, "FORGET maps")["for_uid"], 1000)
        XCTAssertEqual(h.request(h.connect(), "DECISIONS")["decisions"]?.arrayValue?.map { $0["for_uid"] }, [.null])
    }

    func testDecideBadArguments() {
        let h = harness()
        let c = h.connect(Peers.admin)
        let usage = "usage: DECIDE APP KIND allow|deny [--once]"
        let rows: [(String, String)] = [
            ("DECIDE maps", usage), ("DECIDE maps wwan", usage), ("DECIDE --once", usage),
            ("DECIDE maps wwan allow --forever", usage), ("DECIDE maps wwan --once allow", usage),
            ("DECIDE maps wwan allow --once x", usage),
            ("DECIDE 1maps wwan allow", "invalid app id '1maps'"),
            ("DECIDE ma/ps wwan allow", "invalid app id 'ma/ps'"),
            ("DECIDE maps loopback allow", "bad kind 'loopback' (expected wifi, wwan, ethernet, other, metered or roaming)"),
            ("DECIDE maps lte allow", "bad kind 'lte' (expected wifi, wwan, ethernet, other, metered or roaming)"),
            ("DECIDE maps wwan ask", "bad decision 'ask' (expected allow or deny)"),
            ("DECIDE maps wwan maybe", "bad decision 'maybe' (expected allow or deny)"),
        ]
        for (line, message) in rows { XCTAssertEqual(h.requestError(c, line, .badArguments), message, line) }
        XCTAssertFalse(h.steps.contains("persist"))
        XCTAssertFalse(h.connections[c]!.held)
        XCTAssertEqual(source(h, "maps"), "no-agent")
    }

    /// The reply: what was decided, then the app's verdict as it now is (matched by name). Kind and decision in
    /// any case.
    func testDecideReply() {
        let h = harness()
        let r = h.request(h.connect(Peers.admin), "DECIDE maps WWAN Allow")
        XCTAssertEqual(r.keys, ["ok", "decided", "app", "matched_by", "available", "reason", "via", "egress",
                                "bind_to", "denied_kinds", "pending_kinds", "permissions", "sources",
                                "enforced", "enforced_why", "message"])
        XCTAssertEqual(r["decided"], .object([("app", "maps"), ("kind", "wwan"), ("decision", "allow"),
                                              ("once", false), ("overridden_by_policy", false), ("for_uid", .null)]))
        XCTAssertEqual(r["app"], "maps")
        XCTAssertEqual(r["matched_by"], "name")
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(r["via"]?["name"], "wwan0")
        XCTAssertEqual(r["egress"]?["ipv4"]?["allowed"], true, "the decision makes the kernel's route one maps may use")
        XCTAssertEqual(r["sources"]?["wwan"], "decision")
        XCTAssertEqual(h.logged(containing: "decision: maps may use wwan").count, 1)
    }

    /// Any valid app id may be decided for, in the policy or not: a program no section names gets it under its
    /// derived id.
    func testDecideForAnAppOutsideThePolicy() {
        let h = harness()
        let r = h.request(h.connect(), "DECIDE weather wwan allow")
        XCTAssertEqual(r["app"], "weather")
        XCTAssertEqual(r["matched_by"], "name")
        XCTAssertEqual(r["reason"], "ok")
        let q = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/weather")), "QUERY")
        XCTAssertEqual(q["matched_by"], "default")
        XCTAssertEqual(q["sources"]?["wwan"], "decision")
    }

    /// A lasting decision is on disk before the reply says ok, and not in force before: meanwhile others get the
    /// old answer and subscribers hear nothing. Then the app's event, then the reply.
    func testLastingDecisionIsPersistedBeforeTheReply() {
        let h = harness()
        h.storeIsManual = true
        let watcher = h.connect()
        _ = h.subscribe(watcher, "apps")
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.send(admin, "DECIDE maps wwan allow"), [])
        XCTAssertTrue(h.connections[admin]!.held)
        XCTAssertEqual(h.pendingStores.count, 1)
        XCTAssertEqual(decision(h.pendingStores.first, "maps", .wwan), "allow decision")
        XCTAssertEqual(source(h, "maps"), "no-agent", "not in force before it is on disk")
        XCTAssertEqual(h.take(watcher), [])
        let mark = h.steps.count
        h.completeStore()
        XCTAssertEqual(h.persisted.count, 1)
        XCTAssertEqual(h.takeParsed(admin).first?["decided"]?["decision"], "allow")
        XCTAssertFalse(h.connections[admin]!.held)
        XCTAssertEqual(h.takeEvents(watcher).map { $0["app"] }, ["maps"])
        XCTAssertEqual(h.steps[mark...].filter { !$0.hasPrefix("log") },
                       ["event \(watcher) app", "reply \(admin)", "resume \(admin)"])
        XCTAssertEqual(source(h, "maps"), "decision")
    }

    /// --once: in force at once, never written, and gone when the policy changes (RELOAD or SIGHUP of changed files),
    /// where a lasting decision stays. A load of the same policy keeps it (issue 36, point 12: it ended at any reload).
    func testOnceDecision() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let r = h.request(admin, "DECIDE maps wwan allow --once")
        XCTAssertEqual(r["decided"]?["once"], true)
        XCTAssertEqual(r["sources"]?["wwan"], "once")
        XCTAssertFalse(h.steps.contains("persist"))
        XCTAssertEqual(h.logged(containing: "decision: maps may use wwan (once)").count, 1)
        h.reload(policy: policy)
        XCTAssertEqual(source(h, "maps"), "once", "the same policy: nothing changed")
        h.reload(policy: policy + "\n[App npt-changed]\nUser=9999\n")
        XCTAssertEqual(source(h, "maps"), "no-agent")
        // Once over lasting, until the policy changes; then the lasting one again.
        _ = h.request(admin, "DECIDE maps wwan deny")
        _ = h.request(admin, "DECIDE maps wwan allow --once")
        XCTAssertEqual(h.persisted.count, 1)
        XCTAssertEqual(source(h, "maps"), "once")
        h.policyFiles = [("/etc/netpermd/netpermd.conf", policy)]
        XCTAssertEqual(h.request(admin, "RELOAD")["ok"], true)
        let q = h.request(h.connect(), "QUERY maps")
        XCTAssertEqual(q["sources"]?["wwan"], "decision")
        XCTAssertEqual(q["permissions"]?["wwan"], "deny")
    }

    /// The store fails: `internal`, the reason, and nothing changed (verdicts, prompts, what later decisions start
    /// from); the connection goes on.
    func testFailedStoreChangesNothing() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        _ = h.request(h.connect(Peers.maps), "QUERY")
        _ = h.take(agent)
        h.storeError = EdgeError(.storeDecisions, errno: ENOSPC, "/var/lib/netpermd/decisions.conf: No space left on device")
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.requestError(admin, "DECIDE maps wwan allow", .internalError),
                       "cannot store the decision: /var/lib/netpermd/decisions.conf: No space left on device")
        XCTAssertEqual(h.logged(containing: "cannot store the decisions:").count, 1)
        XCTAssertEqual(h.log.last?.0, .err)
        XCTAssertFalse(h.connections[admin]!.held)
        XCTAssertEqual(h.take(agent), [], "no prompt-answered, no app event")
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"]?.arrayValue?.count, 1)
        XCTAssertEqual(h.request(admin, "QUERY maps")["reason"], "awaiting-decision")
        XCTAssertTrue(h.persisted.isEmpty)
        h.storeError = nil
        XCTAssertEqual(h.request(admin, "DECIDE maps wifi deny")["ok"], true)
        XCTAssertNil(decision(h.persisted.last, "maps", .wwan), "the failed one is not in the next write")
        // FORGET too.
        h.storeError = EdgeError(.storeDecisions, errno: EIO, "EIO")
        h.requestError(admin, "FORGET maps", .internalError)
        XCTAssertEqual(decision(h.engine.state.decisions, "maps", .wifi), "deny decision")
    }

    /// An explicit allow or deny in the policy wins; the decision is kept (and written) for when the policy changes.
    func testOverriddenByPolicy() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let r = h.request(admin, "DECIDE updater wwan allow")
        XCTAssertEqual(r["decided"]?["overridden_by_policy"], true)
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["sources"]?["wwan"], "policy")
        XCTAssertEqual(decision(h.persisted.last, "updater", .wwan), "allow decision")
        // [Defaults]' WiFi=allow is the policy's too.
        XCTAssertEqual(h.request(admin, "DECIDE maps wifi deny")["decided"]?["overridden_by_policy"], true)
        h.reload(policy: policy.replacingOccurrences(of: "WWAN=deny", with: "WWAN=ask"))
        let q = h.request(admin, "QUERY updater")
        XCTAssertEqual(q["sources"]?["wwan"], "decision")
        XCTAssertEqual(q["reason"], "ok")
    }

    func testForget() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.send(admin, "FORGET maps wwan"), [#"{"ok":true,"forgotten":false,"app":"maps","kind":"wwan","for_uid":null}"#])
        XCTAssertFalse(h.steps.contains("persist"), "nothing to forget, nothing to write")
        _ = h.request(admin, "DECIDE maps wwan allow")
        _ = h.request(admin, "DECIDE maps wifi deny")
        XCTAssertEqual(h.send(admin, "FORGET maps WWAN"), [#"{"ok":true,"forgotten":true,"app":"maps","kind":"wwan","for_uid":null}"#])
        XCTAssertNil(decision(h.persisted.last, "maps", .wwan))
        XCTAssertEqual(decision(h.persisted.last, "maps", .wifi), "deny decision")
        XCTAssertEqual(h.logged(containing: "forgot the decisions of maps for wwan").count, 1)
        XCTAssertEqual(source(h, "maps"), "no-agent")
        XCTAssertEqual(h.send(admin, "FORGET maps"), [#"{"ok":true,"forgotten":true,"app":"maps","kind":null,"for_uid":null}"#])
        XCTAssertEqual(h.persisted.last, Decisions())
        XCTAssertEqual(h.send(admin, "FORGET maps"), [#"{"ok":true,"forgotten":false,"app":"maps","kind":null,"for_uid":null}"#])
        // A --once decision is forgotten too.
        _ = h.request(admin, "DECIDE maps wwan allow --once")
        XCTAssertEqual(h.request(admin, "FORGET maps")["forgotten"], true)
        XCTAssertEqual(source(h, "maps"), "no-agent")
    }

    func testForgetBadArguments() {
        let h = harness()
        let c = h.connect(Peers.admin)
        for line in ["FORGET", "FORGET 1x", "FORGET maps wwan x"] {
            XCTAssertEqual(h.requestError(c, line, .badArguments), "usage: FORGET APP [KIND]", line)
        }
        XCTAssertEqual(h.requestError(c, "FORGET maps lte", .badArguments),
                       "bad kind 'lte' (expected wifi, wwan, ethernet, other, metered or roaming)")
    }

    // MARK: One write at a time

    /// Two connections decide while the first write is pending: the second waits, then starts from the first's
    /// result, and the replies come in order.
    func testDecisionsOnTwoConnectionsAreAppliedInOrder() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        let b = h.connect(Peers.root)
        let c = h.connect(Peers.root)
        XCTAssertEqual(h.send(a, "DECIDE maps wwan allow"), [])
        XCTAssertEqual(h.send(b, "DECIDE weather wwan deny"), [])
        XCTAssertEqual(h.send(c, "DECIDE maps wifi deny --once"), [])
        XCTAssertTrue(h.connections[b]!.held && h.connections[c]!.held)
        XCTAssertEqual(h.pendingStores.count, 1, "one write at a time")
        h.completeStore()
        XCTAssertEqual(h.take(a).count, 1)
        XCTAssertEqual(h.take(b), [], "its write has only begun")
        XCTAssertEqual(h.pendingStores.count, 1)
        XCTAssertEqual(decision(h.pendingStores.first, "maps", .wwan), "allow decision", "from the first's result")
        XCTAssertEqual(decision(h.pendingStores.first, "weather", .wwan), "deny decision")
        h.completeStore()
        XCTAssertEqual(h.takeParsed(b).first?["decided"]?["app"], "weather")
        XCTAssertEqual(h.takeParsed(c).first?["decided"]?["once"], true, "the --once one after both")
        XCTAssertFalse(h.connections[b]!.held || h.connections[c]!.held)
        XCTAssertEqual(h.persisted.count, 2)
        XCTAssertEqual(decision(h.engine.state.decisions, "maps", .wifi), "deny once")
    }

    /// The first write fails: the next decision starts from the state without it.
    func testQueuedDecisionAfterAFailedWrite() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        let b = h.connect(Peers.root)
        _ = h.send(a, "DECIDE maps wwan allow")
        _ = h.send(b, "FORGET maps")
        h.completeStore(error: EdgeError(.storeDecisions, errno: EIO, "EIO"))
        XCTAssertEqual(h.takeParsed(a).first?["error"], "internal")
        XCTAssertEqual(h.takeParsed(b), [[("ok", true), ("forgotten", false), ("app", "maps"), ("kind", .null), ("for_uid", .null)]].map(JSON.object))
        XCTAssertTrue(h.pendingStores.isEmpty)
    }

    /// Pipelined on one connection: the transport holds the rest until the reply.
    func testDecisionsPipelinedOnOneConnection() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        for line in ["DECIDE maps wwan allow", "FORGET maps wwan", "PING"] { XCTAssertEqual(h.send(a, line), []) }
        h.completeStore()
        XCTAssertEqual(h.takeParsed(a).count, 1)
        h.completeStore()
        XCTAssertEqual(h.takeParsed(a).map { $0.keys[1] }, ["forgotten", "pong"])
        XCTAssertEqual(h.persisted.last, Decisions())
    }

    /// The engine does not rely on the transport: a decision that reaches it while a write is pending, even from
    /// the connection it holds, waits its turn.
    func testEngineQueuesDecisionsItself() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        _ = h.send(a, "DECIDE maps wwan allow")
        h.feed(.line(a, Array("DECIDE maps wifi deny".utf8)))
        XCTAssertEqual(h.take(a), [])
        XCTAssertEqual(h.pendingStores.count, 1)
        h.completeStore()
        h.completeStore()
        XCTAssertEqual(h.takeParsed(a).map { $0["decided"]?["kind"] }, ["wwan", "wifi"])
        XCTAssertEqual(decision(h.persisted.last, "maps", .wwan), "allow decision")
        XCTAssertEqual(decision(h.persisted.last, "maps", .wifi), "deny decision")
    }

    /// A decision waiting its turn is checked again when its turn comes: a reload meanwhile took its sender out of
    /// the admin group, so with `UserDecisions=no` it is refused and never written, and otherwise it is a decision
    /// for the sender's own uid only, never everyone's.
    func testAQueuedDecisionIsRefusedIfItsSenderLostItsPrivilege() {
        for userDecisions in [false, true] {
            let h = harness()
            h.storeIsManual = true
            let root = h.connect(Peers.root)
            let admin = h.connect(Peers.admin)
            _ = h.send(root, "DECIDE maps wwan allow")
            XCTAssertEqual(h.send(admin, "DECIDE weather wwan allow"), [], "waits for the first write")
            h.reload(policy: "[Defaults]\nAdminGroup=wheel\n" + (userDecisions ? "" : "UserDecisions=no\n") + policy)
            h.completeStore()
            XCTAssertNil(decision(h.engine.state.decisions, "weather", .wwan), "not everyone's")
            if userDecisions {
                XCTAssertEqual(h.pendingStores.count, 1, "its own write")
                h.completeStore()
                XCTAssertEqual(h.takeParsed(admin).first?["decided"]?["for_uid"], 1001)
                XCTAssertTrue(h.engine.state.decisions.hasOwn("weather", uid: 1001))
            } else {
                XCTAssertEqual(h.takeParsed(admin).first?["error"], "permission-denied")
                XCTAssertTrue(h.pendingStores.isEmpty, "never written")
            }
            XCTAssertFalse(h.connections[admin]!.held)
        }
    }

    /// The requester leaves while its decision is written: no reply, but the decision stands.
    func testRequesterLeavingDuringTheWrite() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        _ = h.send(a, "DECIDE maps wwan allow")
        h.disconnect(a)
        h.completeStore()
        XCTAssertEqual(h.connections[a]!.lines, [])
        XCTAssertEqual(source(h, "maps"), "decision")
    }

    /// One waiting its turn leaves: its decision is never written.
    func testQueuedRequesterLeaving() {
        let h = harness()
        h.storeIsManual = true
        let a = h.connect(Peers.admin)
        let b = h.connect(Peers.root)
        _ = h.send(a, "DECIDE maps wwan allow")
        _ = h.send(b, "DECIDE weather wwan allow")
        h.disconnect(b)
        h.completeStore()
        XCTAssertTrue(h.pendingStores.isEmpty)
        XCTAssertNil(decision(h.engine.state.decisions, "weather", .wwan))
    }

    /// A policy load while a lasting decision is being written drops the --once decisions; the write, started
    /// before, must not bring them back when it completes.
    func testOnceDecisionDroppedByAReloadDuringAWriteStaysDropped() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        _ = h.request(admin, "DECIDE maps wwan allow --once")
        h.storeIsManual = true
        _ = h.send(admin, "DECIDE weather wwan allow")
        h.reload(policy: policy + "\n[App npt-changed]\nUser=9999\n")
        XCTAssertEqual(source(h, "maps"), "no-agent")
        h.completeStore()
        XCTAssertEqual(source(h, "maps"), "no-agent", "the --once decision came back with the write")
        XCTAssertEqual(decision(h.engine.state.decisions, "weather", .wwan), "allow decision")
    }
}
