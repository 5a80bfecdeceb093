// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// QUERY and APPS: which app the caller is, what it may ask about, the verdict's fields, and the reply cache.
final class EngineQueryTests: XCTestCase {
    private let policy = Policies.curlBackupAndModem

    private func harness(_ links: [Link] = [Links.wwan], agents: Bool = true, started: Bool = true) -> EngineHarness {
        EngineHarness(policy: policy, links: links, agents: agents, started: started)
    }

    // MARK: QUERY

    /// Asking about oneself, with or without naming oneself: the verdict, then who the kernel says asked.
    func testQueryOwnAppHasIdentity() {
        let h = harness()
        let c = h.connect(Peers.curl)
        for line in ["QUERY", "query curl"] {
            let r = h.request(c, line)
            XCTAssertEqual(r.keys, ["ok", "app", "matched_by", "available", "reason", "via", "egress", "bind_to",
                                    "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why",
                                    "message", "identity"], line)
            XCTAssertEqual(r["ok"], true, line)
            XCTAssertEqual(r["app"], "curl", line)
            XCTAssertEqual(r["matched_by"], "executable", line)
            XCTAssertEqual(r["available"], true, line)
            XCTAssertEqual(r["reason"], "ok", line)
            XCTAssertEqual(r["via"], .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null)]),
                           line)
            XCTAssertEqual(r["egress"], .object([
                ("ipv4", .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null),
                                  ("usable", true), ("allowed", true)])),
                ("ipv6", .null),
            ]), line)
            XCTAssertEqual(r["bind_to"], .null, line)
            XCTAssertEqual(r["denied_kinds"], .array([]), line)
            XCTAssertEqual(r["pending_kinds"], .array([]), line)
            XCTAssertEqual(r["permissions"], .object([("wifi", "allow"), ("wwan", "allow"), ("ethernet", "allow"),
                                                      ("other", "allow"), ("metered", "allow"), ("roaming", "allow")]), line)
            XCTAssertEqual(r["sources"], .object([("wifi", "policy"), ("wwan", "policy"), ("ethernet", "policy"),
                                                  ("other", "policy"), ("metered", "policy"), ("roaming", "policy")]), line)
            XCTAssertEqual(r["identity"], .object([("pid", 4242), ("uid", 1000), ("executable", "/usr/bin/curl"),
                                                   ("unit", .null)]), line)
        }
    }

    /// Matched by unit, by user, and by nothing (a derived id that never takes a policy app's name, with
    /// [Defaults]' permissions, not that app's).
    func testHowTheCallerIsMatched() {
        let h = harness([Links.eth, Links.wwan])
        let backup = h.request(h.connect(makePeer(uid: 5, exe: "/usr/bin/rsync", unit: "backup.service")), "QUERY")
        XCTAssertEqual(backup["app"], "backup")
        XCTAssertEqual(backup["matched_by"], "unit")
        XCTAssertEqual(backup["denied_kinds"], .array(["wwan"]))
        XCTAssertEqual(backup["identity"]?["unit"], "backup.service")
        let modem = h.request(h.connect(makePeer(uid: 7, exe: "/usr/sbin/mmcli")), "QUERY")
        XCTAssertEqual(modem["app"], "modem")
        XCTAssertEqual(modem["matched_by"], "user")
        let impostor = h.request(h.connect(makePeer(uid: 1000, exe: "/opt/bin/backup")), "QUERY")
        XCTAssertEqual(impostor["app"], "backup-2")
        XCTAssertEqual(impostor["matched_by"], "default")
        XCTAssertEqual(impostor["permissions"]?["wwan"], "ask", "[Defaults], not [App backup]'s deny")
    }

    /// An app no section names is still answered, under its derived id, with [Defaults] (WWAN=ask); asking about
    /// itself while awaiting a decision raises a prompt.
    func testQueryUnnamedAppAwaitingADecision() {
        let h = harness()
        let agent = h.connections.keys.max()!
        let r = h.request(h.connect(Peers.admin), "QUERY")
        XCTAssertEqual(r["app"], "netpermctl")
        XCTAssertEqual(r["matched_by"], "default")
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(r["pending_kinds"], .array(["wwan"]))
        XCTAssertEqual(r["via"], .null)
        XCTAssertEqual(r["permissions"]?["wwan"], "ask")
        XCTAssertEqual(r["identity"]?["pid"], 77)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["app"] }, ["netpermctl"])
    }

    /// A peer whose executable could not be read: named after its uid, and the identity says why.
    func testIdentityWithAProblem() {
        let h = harness()
        let peer = PeerIdentity(pid: 9, uid: 1000, gids: [1000], executable: nil, unit: nil,
                                problem: "cannot read /proc/9/exe: Permission denied")
        let r = h.request(h.connect(peer), "QUERY")
        XCTAssertEqual(r["app"], "uid-1000")
        XCTAssertEqual(r["identity"], .object([("pid", 9), ("uid", 1000), ("executable", .null), ("unit", .null),
                                               ("problem", "cannot read /proc/9/exe: Permission denied")]))
    }

    /// Naming another app that awaits a decision does not prompt: only the app asking about itself does.
    func testQueryOtherAwaitingAppDoesNotPrompt() {
        let h = harness()
        let agent = h.connections.keys.max()!
        let r = h.request(h.connect(Peers.admin), "QUERY modem")
        XCTAssertEqual(r["reason"], "awaiting-decision")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        // Available, or nothing usable: nothing to ask either.
        XCTAssertEqual(h.request(h.connect(Peers.curl), "QUERY")["reason"], "ok")
        h.setLinks([])
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 7, exe: nil)), "QUERY")["reason"], "no-network")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
    }

    /// Only the privileged may name another app; whether it exists is not revealed to the others.
    func testQueryOtherAppUnprivilegedIsDenied() {
        let h = harness()
        let c = h.connect(Peers.curl)
        for line in ["QUERY backup", "QUERY nosuch"] {
            let message = h.requestError(c, line, .permissionDenied)
            XCTAssertEqual(message, "only root or members of group 'netperm' may name another app; leave APP out to "
                + "ask about yourself (curl)")
        }
    }

    /// Root and AdminGroup= members name any app of the policy: matched by name, no identity (it is not theirs).
    func testQueryOtherAppPrivileged() {
        let h = harness()
        for peer in [Peers.admin, makePeer(uid: 0, exe: "/usr/bin/curl")] {
            let r = h.request(h.connect(peer), "QUERY backup")
            XCTAssertEqual(r["ok"], true)
            XCTAssertEqual(r["app"], "backup")
            XCTAssertEqual(r["matched_by"], "name")
            XCTAssertEqual(r["available"], false)
            XCTAssertEqual(r["reason"], "denied")
            XCTAssertEqual(r["denied_kinds"], .array(["wwan"]))
            XCTAssertNil(r["identity"], "someone else's app: no caller identity")
        }
    }

    /// A privileged caller naming its own (derived) app is asking about itself.
    func testNamingOneselfIsAskingAboutOneself() {
        let h = harness()
        let r = h.request(h.connect(Peers.root), "QUERY tester")
        XCTAssertEqual(r["matched_by"], "default")
        XCTAssertEqual(r["identity"]?["pid"], 1)
    }

    func testQueryUnknownAppPrivilegedIsNotFound() {
        let h = harness()
        XCTAssertEqual(h.requestError(h.connect(Peers.admin), "QUERY nosuch", .notFound), "no [App nosuch] in the policy")
    }

    func testQueryTooManyArguments() {
        let h = harness()
        XCTAssertEqual(h.requestError(h.connect(Peers.admin), "QUERY curl backup", .badArguments), "usage: QUERY [APP]")
    }

    /// Before `started` every verdict is `starting`, even with links that would allow it.
    func testQueryBeforeStarted() {
        let h = harness([Links.eth, Links.wwan], started: false)
        let r = h.request(h.connect(Peers.curl), "QUERY")
        XCTAssertEqual(r["ok"], true)
        XCTAssertEqual(r["reason"], "starting")
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["via"], .null)
        h.feed(.started)
        XCTAssertEqual(h.request(h.connect(Peers.curl), "QUERY")["reason"], "ok")
    }

    /// `denied_kinds` describes the usable links whatever `available` says.
    func testAvailableAppStillListsDeniedKinds() {
        let h = harness([Links.eth, Links.wwan])
        let r = h.request(h.connect(Peers.admin), "QUERY backup")
        XCTAssertEqual(r["available"], true)
        XCTAssertEqual(r["via"]?["name"], "eth0")
        XCTAssertEqual(r["denied_kinds"], .array(["wwan"]))
    }

    // MARK: APPS

    /// A user's APPS lists only the apps of their own uid: here none (curl runs under [Defaults]).
    func testAppsOfAUserAreTheirOwn() {
        let h = harness()
        XCTAssertEqual(h.request(h.connect(Peers.curl), "APPS")["apps"], .array([]))
    }

    /// Every [App] in definition order, matched by name, each with its verdict (no identity).
    func testAppsListsThePolicyInOrder() throws {
        let h = harness()
        let r = h.request(h.connect(Peers.admin), "APPS")
        XCTAssertEqual(r.keys, ["ok", "apps"])
        let apps = try XCTUnwrap(r["apps"]?.arrayValue)
        XCTAssertEqual(apps.map { $0["app"] }, ["curl", "backup", "modem"])
        XCTAssertEqual(apps.map { $0["matched_by"] }, ["name", "name", "name"])
        XCTAssertEqual(apps.map { $0["available"] }, [true, false, false])
        XCTAssertEqual(apps.map { $0["reason"] }, ["ok", "denied", "awaiting-decision"])
        XCTAssertTrue(apps.allSatisfy { $0["identity"] == nil && $0.keys.first == "app" })
        // Derived apps are not the policy's: a caller asking does not add itself.
        _ = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(h.request(h.connect(Peers.admin), "APPS")["apps"]?.arrayValue?.count, 3)
    }

    func testAppsOfAnEmptyPolicy() {
        let h = EngineHarness(links: [Links.eth])
        XCTAssertEqual(h.send(h.connect(), "APPS"), [#"{"ok":true,"apps":[]}"#])
    }

    // MARK: The reply cache

    /// The same request in the same state gets the same bytes, from this connection or any other.
    func testRepeatedRequestGetsTheSameBytes() {
        let h = harness([Links.eth, Links.wwan])
        let c = h.connect(Peers.curl)
        let admin = h.connect(Peers.admin)
        for (conn, line) in [(c, "QUERY"), (c, "STATUS"), (c, "LINKS"), (c, "HELP"), (admin, "APPS"),
                             (admin, "QUERY backup"), (admin, "PROMPTS"), (c, "QUERY backup")] {
            let first = h.send(conn, line)
            XCTAssertEqual(first.count, 1, line)
            XCTAssertEqual(h.send(conn, line), first, line)
            XCTAssertEqual(h.send(conn, line), first, line)
        }
    }

    /// After any change of what a reply depends on (links, policy, decisions, prompts, agents), a repeated
    /// request gets the new answer: the same bytes a connection that never asked before gets.
    func testRepeatedRequestIsFreshAfterEveryKindOfChange() {
        let h = harness([Links.eth], agents: false)
        let admin = h.connect(Peers.admin)
        let curl = h.connect(Peers.curl)
        let modem = h.connect(makePeer(uid: 7, exe: nil, pid: 700))
        var agent: ConnectionID?
        let changes: [(String, ConnectionID, String, () -> Void)] = [
            ("a link", curl, "QUERY", { h.setLinks([Links.eth, makeLink(4, "wwan0", .wwan, metric: 5)]) }),
            ("the route moves", curl, "QUERY", {
                h.setLinks([Links.eth, makeLink(4, "wwan0", .wwan, metric: 5)], egress: [.ipv4: .link(2)])
            }),
            ("link gone", admin, "STATUS", { h.setLinks([Links.wwan]) }),
            ("policy", admin, "QUERY backup", { h.reload(policy: self.policy.replacingOccurrences(of: "WWAN=deny",
                                                                                                   with: "WWAN=allow")) }),
            ("agent comes", admin, "QUERY modem", { agent = h.connectAgent() }),
            ("prompt raised", admin, "PROMPTS", { _ = h.send(modem, "QUERY") }),
            ("decision", admin, "QUERY modem", { _ = h.send(admin, "DECIDE modem wwan allow") }),
            ("forgotten", admin, "QUERY modem", { _ = h.send(admin, "FORGET modem") }),
            ("agent leaves", admin, "QUERY modem", { h.disconnect(agent!) }),
            ("once decision", admin, "APPS", { _ = h.send(admin, "DECIDE modem wwan allow --once") }),
            ("once dropped by a reload", admin, "APPS", { h.reload(policy: self.policy) }),
        ]
        for (what, conn, line, change) in changes {
            let before = h.send(conn, line)
            XCTAssertEqual(h.send(conn, line), before, "\(what): same state, same bytes")
            change()
            let after = h.send(conn, line)
            let fresh = h.connect(conn == curl ? Peers.curl : Peers.admin)
            XCTAssertEqual(after, h.send(fresh, line), "\(what): \(line) after the change")
            XCTAssertNotEqual(after, before, "\(what): \(line) should change")
        }
    }

    /// A prompt that expires changes PROMPTS, and so does one answered by DECIDE.
    func testPromptsReplyIsFreshAfterExpiryAndAnswer() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let modem = h.connect(makePeer(uid: 7, exe: nil, pid: 700))
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"], .array([]))
        _ = h.send(modem, "QUERY")
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"]?.arrayValue?.count, 1)
        h.advance(bySeconds: 60)
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"], .array([]))
        _ = h.send(modem, "QUERY")
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"]?.arrayValue?.count, 1)
        XCTAssertEqual(h.request(admin, "DECIDE modem wwan deny")["ok"], true)
        XCTAssertEqual(h.request(admin, "PROMPTS")["prompts"], .array([]))
    }
}
