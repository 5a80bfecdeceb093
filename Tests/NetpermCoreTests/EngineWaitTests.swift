// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// WAIT: answered at once when available, else held until the verdict becomes available or the time-out passes;
/// the connection's later requests wait behind it.
final class EngineWaitTests: XCTestCase {
    private let policy = Policies.curlBackupAndModem

    private func harness(_ links: [Link] = [], agents: Bool = false, started: Bool = true) -> EngineHarness {
        EngineHarness(policy: policy, links: links, agents: agents, started: started)
    }

    private func timerSteps(_ h: EngineHarness, from mark: Int) -> [String] {
        h.steps[mark...].filter { $0.hasPrefix("arm") || $0.hasPrefix("cancel") }
    }

    func testAvailableRepliesAtOnce() {
        let h = harness([Links.wwan])
        let c = h.connect(Peers.curl)
        let mark = h.steps.count
        for line in ["WAIT", "WAIT 5", "WAIT curl", "WAIT curl 0.5", "wait 0"] {
            let r = h.request(c, line)
            XCTAssertEqual(r.keys, ["ok", "app", "matched_by", "available", "reason", "via", "egress", "bind_to",
                                    "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why", "message"], line)
            XCTAssertEqual(r["app"], "curl", line)
            XCTAssertEqual(r["matched_by"], "executable", line)
            XCTAssertEqual(r["available"], true, line)
            XCTAssertEqual(r["via"]?["name"], "wwan0", line)
            XCTAssertFalse(h.connections[c]!.held, line)
        }
        XCTAssertEqual(timerSteps(h, from: mark), [], "no timer for a wait that does not wait")
        // A named app that is available: also at once.
        h.setLinks([Links.eth])
        let named = h.request(h.connect(Peers.admin), "WAIT backup 3")
        XCTAssertEqual(named["app"], "backup")
        XCTAssertEqual(named["matched_by"], "name")
        XCTAssertEqual(named["via"]?["name"], "eth0")
    }

    /// A session's role changes through one setter, which logs it old -> new: subscribed, then held in a WAIT,
    /// then answered, then gone.
    func testASessionsRoleIsLoggedAsItChanges() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        _ = h.request(admin, "SUBSCRIBE")
        XCTAssertEqual(h.send(admin, "WAIT backup"), [])
        h.setLinks([Links.wwan, Links.wlan, Links.eth])
        _ = h.take(admin)
        h.disconnect(admin)
        let roles = h.log.map(\.1).filter { $0.hasPrefix("connection \(admin): ") }
        XCTAssertEqual(roles, ["connection \(admin): client -> subscriber", "connection \(admin): subscriber -> subscriber+waiting",
                               "connection \(admin): subscriber+waiting -> subscriber", "connection \(admin): subscriber -> client"])
    }

    /// No reply until a link the app may use is usable; a change that does not help keeps it waiting.
    func testHeldThenAnsweredWhenTheVerdictBecomesAvailable() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.send(admin, "WAIT backup"), [])
        XCTAssertTrue(h.connections[admin]!.held)
        XCTAssertEqual(h.armedTimers, 0, "no time-out, no timer")
        h.setLinks([Links.wwan, Links.wlan])
        XCTAssertEqual(h.take(admin), [], "backup may use neither")
        XCTAssertTrue(h.connections[admin]!.held)
        let mark = h.steps.count
        h.setLinks([Links.wwan, Links.wlan, Links.eth])
        let r = h.takeParsed(admin)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r.first?["ok"], true)
        XCTAssertEqual(r.first?["reason"], "ok")
        XCTAssertEqual(r.first?["via"]?["name"], "eth0")
        XCTAssertEqual(r.first?["denied_kinds"], .array(["wifi", "wwan"]))
        XCTAssertEqual(h.steps[mark...].filter { $0.hasSuffix(" \(admin)") }, ["reply \(admin)", "resume \(admin)"])
        XCTAssertFalse(h.connections[admin]!.held)
    }

    /// Routed elsewhere is not available: the WAIT is held while the kernel sends the app's traffic by a link it may
    /// not use, though a link it may use is usable (bind_to), and while a change keeps it so; it is answered once the
    /// route moves to that link.
    func testHeldWhileRoutedElsewhereThenAnsweredWhenTheRouteMoves() {
        let wwanFirst = makeLink(4, "wwan0", .wwan, metric: 50)
        let h = harness([Links.eth, wwanFirst])
        let admin = h.connect(Peers.admin)
        let q = h.request(admin, "QUERY backup")
        XCTAssertEqual(q["reason"], "routed-elsewhere")
        XCTAssertEqual(q["bind_to"]?["name"], "eth0")
        XCTAssertEqual(h.send(admin, "WAIT backup"), [])
        XCTAssertTrue(h.connections[admin]!.held)
        h.setLinks([Links.eth, Links.wlan, wwanFirst])
        XCTAssertEqual(h.take(admin), [], "the kernel still routes by cellular")
        XCTAssertTrue(h.connections[admin]!.held)
        // A rule sends the traffic by Ethernet now; no link changed.
        h.setLinks([Links.eth, Links.wlan, wwanFirst], egress: [.ipv4: .link(2)])
        let r = h.takeParsed(admin)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r.first?["reason"], "ok")
        XCTAssertEqual(r.first?["via"]?["name"], "eth0")
        XCTAssertEqual(r.first?["bind_to"], .null)
        XCTAssertEqual(r.first?["egress"]?["ipv4"]?["allowed"], true)
        XCTAssertEqual(r.first?["denied_kinds"], .array(["wifi", "wwan"]))
        XCTAssertFalse(h.connections[admin]!.held)
    }

    /// A time-out while routed elsewhere says so, with where to bind.
    func testTimeOutWhileRoutedElsewhere() {
        let h = harness([Links.eth, makeLink(4, "wwan0", .wwan, metric: 50)])
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.send(admin, "WAIT backup 1"), [])
        h.advance(bySeconds: 1)
        let r = h.takeParsed(admin)
        XCTAssertEqual(r.first?["error"], "timeout")
        XCTAssertEqual(r.first?["message"], "backup may not use wwan: its policy denies it (the kernel routes its traffic by wwan0; it may use eth0)")
        XCTAssertEqual(r.first?["bind_to"], .object([("index", 2), ("name", "eth0"), ("kind", "ethernet"),
                                                     ("metered", false), ("roaming", false), ("over", .null)]))
    }

    /// Doubtful: an app waiting for itself whose traffic the kernel sends by a link of a kind it must be asked
    /// about, while a link it may use is usable, is routed elsewhere, and no prompt is raised, though allowing that
    /// kind would make it ok (only awaiting-decision prompts). A decision made anyway answers it.
    func testRoutedElsewhereByAnUndecidedKindDoesNotPrompt() {
        let h = harness([Links.eth, makeLink(4, "wwan0", .wwan, metric: 50)], agents: true)
        let agent = h.connections.keys.max()!
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.send(maps, "WAIT"), [])
        XCTAssertTrue(h.connections[maps]!.held)
        // Asking about itself from another connection does not prompt either.
        let q = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 501)), "QUERY")
        XCTAssertEqual(q["reason"], "routed-elsewhere")
        XCTAssertEqual(q["bind_to"]?["name"], "eth0")
        XCTAssertEqual(q["pending_kinds"], .array(["wwan"]))
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        XCTAssertEqual(h.request(h.connect(Peers.admin), "DECIDE maps wwan allow")["ok"], true)
        XCTAssertEqual(h.takeParsed(maps).first?["via"]?["name"], "wwan0")
    }

    /// The time-out: `timeout` with the verdict that held then (not the one at the start), and the connection
    /// taken up again.
    func testTimeOutRepliesWithTheVerdictThatHeld() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let mark = h.steps.count
        XCTAssertEqual(h.send(admin, "WAIT backup 10"), [])
        XCTAssertEqual(timerSteps(h, from: mark), ["arm 1 10000000"])
        h.advance(bySeconds: 5)
        h.setLinks([Links.wwan])
        h.advance(byMicroseconds: 4_999_999)
        XCTAssertEqual(h.take(admin), [], "not yet")
        h.advance(byMicroseconds: 1)
        let r = h.takeParsed(admin)
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r.first?.keys, ["ok", "error", "message", "app", "matched_by", "available", "reason", "via",
                                       "egress", "bind_to", "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why"])
        XCTAssertEqual(r.first?["ok"], false)
        XCTAssertEqual(r.first?["error"], "timeout")
        XCTAssertEqual(r.first?["message"], "backup may not use wwan: its policy denies it")
        XCTAssertEqual(r.first?["reason"], "denied")
        XCTAssertEqual(r.first?["denied_kinds"], .array(["wwan"]))
        XCTAssertFalse(h.connections[admin]!.held)
        XCTAssertEqual(h.armedTimers, 0)
        XCTAssertEqual(h.request(admin, "PING")["pong"], true)
    }

    /// Seconds may have a fraction; 0 times out at once (on the next turn of the loop).
    func testTimeOutInMicroseconds() {
        let h = harness()
        let c = h.connect(Peers.curl)
        let mark = h.steps.count
        _ = h.send(c, "WAIT 0")
        XCTAssertEqual(timerSteps(h, from: mark), ["arm 1 0"])
        h.advance(byMicroseconds: 0)
        XCTAssertEqual(h.takeParsed(c).first?["message"], "curl cannot use the network: no link is usable")
        _ = h.send(c, "WAIT 0.25")
        _ = h.send(c, "QUIT")
        XCTAssertEqual(timerSteps(h, from: mark), ["arm 1 0", "arm 2 250000"])
        h.advance(byMicroseconds: 250_000)
        XCTAssertEqual(h.takeParsed(c).map { $0["error"] ?? $0["bye"] }, ["timeout", true])
    }

    func testBadArguments() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.requestError(admin, "WAIT backup abc", .badArguments), "usage: WAIT [APP] [SECONDS]")
        XCTAssertEqual(h.requestError(admin, "WAIT backup -1", .badArguments),
                       "bad time-out '-1': expected seconds, e.g. 30 or 0.5")
        for line in ["WAIT 1e3", "WAIT 1.2.3", "WAIT 100000000", "WAIT .", "WAIT 0x10"] {
            XCTAssertTrue(h.requestError(admin, line, .badArguments).hasPrefix("bad time-out"), line)
        }
        h.requestError(admin, "WAIT 5 backup", .badArguments)
        h.requestError(admin, "WAIT backup 1 2", .badArguments)
        // Two numbers are not an app and a time-out: app ids start with a letter.
        for peer in [Peers.admin, Peers.curl] {
            XCTAssertEqual(h.requestError(h.connect(peer), "WAIT 1 2", .badArguments),
                           "'1' is not an app id (they start with a letter); usage: WAIT [APP] [SECONDS]")
        }
        XCTAssertFalse(h.connections[admin]!.held)
        XCTAssertEqual(h.armedTimers, 0)
    }

    /// The privilege rules of QUERY.
    func testNamingAnotherApp() {
        let h = harness()
        let curl = h.connect(Peers.curl)
        h.requestError(curl, "WAIT backup", .permissionDenied)
        h.requestError(curl, "WAIT backup 1", .permissionDenied)
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.requestError(admin, "WAIT nosuch 1", .notFound), "no [App nosuch] in the policy")
        XCTAssertEqual(h.armedTimers, 0)
        // Naming oneself is waiting for oneself.
        XCTAssertEqual(h.send(curl, "WAIT curl 1"), [])
        XCTAssertTrue(h.connections[curl]!.held)
    }

    /// Requests pipelined after a held WAIT are answered after it, in order, whether it ends by a change or by
    /// its time-out.
    func testPipelinedRequestsWaitBehindIt() {
        let h = harness()
        let c = h.connect(Peers.curl)
        for line in ["WAIT", "PING", "STATUS", "WAIT 2", "QUERY"] { XCTAssertEqual(h.send(c, line), [], line) }
        h.setLinks([Links.eth])
        let r = h.takeParsed(c)
        XCTAssertEqual(r.map { $0.keys[1] }, ["app", "pong", "version", "app", "app"])
        XCTAssertEqual(r.last?["identity"]?["pid"], 4242, "the QUERY")
        h.setLinks([])
        for line in ["WAIT 2", "PING"] { _ = h.send(c, line) }
        XCTAssertEqual(h.take(c), [])
        h.advance(bySeconds: 2)
        XCTAssertEqual(h.takeParsed(c).map { $0["error"] ?? $0["pong"] }, ["timeout", true])
    }

    /// A waiter that leaves: its timer is cancelled, and an app outside the policy that nobody else waits for or
    /// listens to is no longer tracked (a privileged subscriber stops hearing about it).
    func testWaiterThatDisconnectsIsForgotten() {
        let h = harness()
        let sub = h.connect(Peers.admin)
        _ = h.subscribe(sub, "apps")
        let maps = h.connect(Peers.maps)
        let mark = h.steps.count
        _ = h.send(maps, "WAIT 30")
        h.setLinks([Links.wwan])
        XCTAssertTrue(h.takeEvents(sub, named: "app").contains { $0["app"] == "maps" }, "maps is tracked while it waits")
        h.disconnect(maps)
        XCTAssertEqual(timerSteps(h, from: mark), ["arm 1 30000000", "cancel 1"])
        XCTAssertEqual(h.armedTimers, 0)
        h.setLinks([])
        let events = h.takeEvents(sub, named: "app")
        XCTAssertFalse(events.isEmpty, "the others still change")
        XCTAssertFalse(events.contains { $0["app"] == "maps" }, "nobody waits for maps any more")
        h.advance(bySeconds: 60)
        XCTAssertEqual(h.take(sub), [])
    }

    /// Two waiters for the same app: the one that stays is still answered.
    func testOneOfTwoWaitersLeaving() {
        let h = harness()
        let a = h.connect(Peers.maps)
        let b = h.connect(makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 501))
        _ = h.send(a, "WAIT")
        _ = h.send(b, "WAIT 30")
        h.disconnect(a)
        h.setLinks([Links.eth])
        XCTAssertEqual(h.takeParsed(b).first?["app"], "maps")
        XCTAssertEqual(h.armedTimers, 0)
    }

    /// An app waiting for itself asks: with an agent, a prompt as soon as its verdict awaits a decision (at once,
    /// or when a link of an `ask` kind comes while it waits); a named app's waiter does not prompt.
    func testOwnWaitRaisesPrompts() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        let maps = h.connect(Peers.maps)
        _ = h.send(maps, "WAIT")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "no usable link: nothing to ask")
        h.setLinks([Links.wwan])
        let prompts = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(prompts.first?["app"], "maps")
        XCTAssertEqual(prompts.first?["identity"], .object([("executable", "/usr/bin/maps"), ("unit", .null),
                                                             ("uid", 1000)]))
        XCTAssertEqual(prompts.first?["kind"], "wwan")
        XCTAssertEqual(prompts.first?["link"], .object([("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null)]))
        XCTAssertTrue(h.connections[maps]!.held)
        // Someone else waiting for modem by name: no prompt.
        XCTAssertEqual(h.send(h.connect(Peers.admin), "WAIT modem"), [])
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        // The answer releases the waiter.
        XCTAssertEqual(h.request(h.connect(Peers.admin), "DECIDE maps wwan allow")["ok"], true)
        XCTAssertEqual(h.takeParsed(maps).first?["via"]?["name"], "wwan0")
    }

    /// Not started: wait, even though the links would allow it; `started` answers.
    func testWaitBeforeStarted() {
        let h = harness([Links.eth, Links.wwan], started: false)
        let c = h.connect(Peers.curl)
        XCTAssertEqual(h.send(c, "WAIT"), [])
        h.feed(.started)
        XCTAssertEqual(h.takeParsed(c).first?["reason"], "ok")
    }

    /// A waiter for itself follows the policy: after a reload that names it, its own app is the new one.
    func testOwnWaiterFollowsAReload() {
        let h = harness([Links.wwan])
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.send(maps, "WAIT"), [], "[Defaults] WWAN=ask and no agent: denied")
        h.reload(policy: policy + "\n[App maps]\nExecutable=/usr/bin/maps\nWWAN=allow\n")
        let r = h.takeParsed(maps)
        XCTAssertEqual(r.first?["app"], "maps")
        XCTAssertEqual(r.first?["matched_by"], "executable")
        XCTAssertEqual(r.first?["reason"], "ok")
    }

    /// A WAIT for an app by name does not outlive the app: after a reload removes [App backup], the held WAIT
    /// ends as QUERY backup would, not-found, instead of being judged by a section the policy no longer has.
    func testNamedWaitForAnAppTheReloadRemoved() {
        let h = harness([Links.wwan])
        let admin = h.connect(Peers.admin)
        XCTAssertEqual(h.send(admin, "WAIT backup"), [])
        h.reload(policy: "[Defaults]\nWWAN=allow\n[App curl]\nExecutable=/usr/bin/curl\n")
        XCTAssertEqual(h.requestError(h.connect(Peers.admin), "QUERY backup", .notFound), "no [App backup] in the policy")
        let ended = h.takeParsed(admin)
        XCTAssertEqual(ended.first?["error"], "not-found", "\(ended)")
        XCTAssertEqual(ended.first?["message"], "no [App backup] in the policy any more")
        XCTAssertFalse(h.connections[admin]!.held, "the connection takes requests again")
    }
}
