// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermProtocol
import XCTest

/// Prompts and agents (PROTOCOL.md, "Prompts"): an undecided `ask` is a deny while no agent listens, and a prompt
/// per app and kind while one does; prompts expire, or close when DECIDE answers them.
final class EnginePromptTests: XCTestCase {
    static let policy = """
    [Defaults]
    PromptTimeoutSec=10
    [App maps]
    Executable=/usr/bin/maps
    [App nav]
    Executable=/usr/bin/nav
    WiFi=ask
    [App backup]
    Unit=backup.service
    WWAN=deny
    """

    private let nav = makePeer(uid: 1000, exe: "/usr/bin/nav", pid: 600)
    /// maps run by root: its prompts are everyone's, as a rejected packet of root's is.
    private let rootMaps = makePeer(uid: 0, exe: "/usr/bin/maps", pid: 650)

    private func harness(_ links: [Link] = [Links.wwan], agents: Bool = false) -> EngineHarness {
        EngineHarness(policy: Self.policy, links: links, agents: agents)
    }

    private func noAgentLine(_ app: String, _ kind: String) -> String {
        "\(app) may not use \(kind), which its policy sets to ask: no agent is listening to ask the user "
            + "(run 'netpermctl agent', or 'netpermctl decide \(app) \(kind) allow')"
    }

    private func noticeLines(_ h: EngineHarness) -> [String] {
        h.log.filter { $0.0 == .notice && $0.1.contains("may not use") }.map(\.1)
    }

    // MARK: No agent

    /// Nobody can be asked: the undecided `ask` is a deny that says why, and the app still gets a definite answer.
    func testNoAgentDeniesUndecidedAsk() {
        let h = harness()
        let r = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(r["available"], false)
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["denied_kinds"], .array(["wwan"]))
        XCTAssertEqual(r["pending_kinds"], .array([]))
        XCTAssertEqual(r["permissions"]?["wwan"], "deny")
        XCTAssertEqual(r["sources"], .object([("wifi", "policy"), ("wwan", "no-agent"), ("ethernet", "policy"),
                                              ("other", "policy"), ("metered", "policy"), ("roaming", "policy")]))
        // An explicit deny is the policy's, not for want of an agent.
        let backup = h.request(h.connect(makePeer(uid: 5, exe: nil, unit: "backup.service")), "QUERY")
        XCTAssertEqual(backup["sources"]?["wwan"], "policy")
        // A decision is not an `ask` any more.
        XCTAssertEqual(h.request(h.connect(), "DECIDE maps wwan allow")["ok"], true)
        let decided = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(decided["reason"], "ok")
        XCTAssertEqual(decided["sources"]?["wwan"], "decision")
    }

    /// The log says so once per app and kind, when the app asks about itself (QUERY or WAIT), not at each request
    /// and not when someone else names it.
    func testNoAgentIsLoggedOncePerAppAndKind() {
        let h = harness([Links.wlan, Links.wwan])
        _ = h.request(h.connect(Peers.admin), "QUERY maps")
        XCTAssertEqual(noticeLines(h), [], "someone else asking is not the app asking")
        let maps = h.connect(Peers.maps)
        _ = h.request(maps, "QUERY")
        _ = h.request(maps, "QUERY")
        _ = h.request(h.connect(makePeer(uid: 1001, exe: "/usr/bin/maps", pid: 501)), "QUERY")
        XCTAssertEqual(noticeLines(h), [noAgentLine("maps", "wwan")])
        _ = h.send(h.connect(nav), "WAIT 1")
        XCTAssertEqual(noticeLines(h), [noAgentLine("maps", "wwan"), noAgentLine("nav", "wifi"),
                                        noAgentLine("nav", "wwan")])
        _ = h.request(h.connect(makePeer(uid: 5, exe: nil, unit: "backup.service")), "QUERY")
        XCTAssertEqual(noticeLines(h).count, 3, "backup's deny is the policy's: nothing to say")
    }

    /// A headless device must not fill its log: after 256 app-and-kind lines, one line says the rest are not
    /// logged, until an agent comes.
    func testNoAgentLogIsLimited() {
        let h = harness()
        for i in 0..<260 { _ = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/app\(i)", pid: Int32(i))), "QUERY") }
        XCTAssertEqual(noticeLines(h).count, 256)
        XCTAssertEqual(h.logged(containing: "more apps asked with no agent to prompt").count, 1)
        // An agent comes and goes: the count starts again.
        let agent = h.connectAgent()
        h.disconnect(agent)
        _ = h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/app0", pid: 1)), "QUERY")
        XCTAssertEqual(noticeLines(h).count, 257)
        XCTAssertEqual(noticeLines(h).last, noAgentLine("app0", "wwan"))
    }

    /// Without an agent a WAIT keeps waiting for a link the app may use.
    func testNoAgentWaitWaitsForAnAllowedLink() {
        let h = harness()
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.send(maps, "WAIT"), [])
        h.setLinks([Links.wwan, Links.eth])
        XCTAssertEqual(h.takeParsed(maps).first?["via"]?["name"], "eth0")
    }

    // MARK: Agents coming and going

    /// The first agent turns every undecided `ask` into awaiting-decision: app events for those apps only; an app
    /// already waiting for itself is asked at once, and its prompt is in the agent's snapshot.
    func testFirstAgentTurnsNoAgentDenialsIntoPrompts() throws {
        let h = harness()
        let watcher = h.connect(Peers.root)
        _ = h.subscribe(watcher, "apps")
        let maps = h.connect(Peers.maps)
        XCTAssertEqual(h.send(maps, "WAIT"), [])
        let agent = h.connect(makePeer(uid: 0, exe: "/usr/bin/netpermctl", pid: 99))
        let (_, snapshot) = h.subscribe(agent, "prompts")
        let prompts = try XCTUnwrap(snapshot["prompts"]?.arrayValue)
        XCTAssertEqual(prompts.count, 1)
        XCTAssertEqual(prompts.first?["app"], "maps")
        XCTAssertEqual(prompts.first?["kind"], "wwan")
        XCTAssertEqual(prompts.first?["identity"]?["executable"], "/usr/bin/maps")
        XCTAssertEqual(h.take(agent), [], "the prompt came in the snapshot, not again as an event")
        let events = h.takeEvents(watcher, named: "app")
        XCTAssertEqual(Set(events.compactMap { $0["app"]?.stringValue }), ["maps", "nav", "tester"],
                       "every undecided ask (tester is [Defaults]), not backup")
        XCTAssertTrue(events.allSatisfy { $0["reason"] == "awaiting-decision" })
        XCTAssertEqual(h.logged(containing: "an agent listens for prompts").count, 1)
        XCTAssertTrue(h.connections[maps]!.held, "still waiting, now for the user's answer")
    }

    /// Issue 36, 12: prompt ids were one counter for everyone, so a user saw how many others were asked between two
    /// of their own prompts. Issue 48: the key was only XORed into the counter before steps anyone could undo, so a
    /// user decoded two of their own ids to 6 and 8: one other prompt between them. Every step is keyed now.
    func testPromptIdsTellNothingOfOthers() throws {
        let key = PromptIDKey(0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)
        let ids = (1...200_000).map { PromptIDs.permuted(UInt32($0), key: key) }
        XCTAssertEqual(Set(ids).count, ids.count, "distinct")
        XCTAssertTrue(ids.allSatisfy { $0 <= 0x7FFF_FFFF }, "a JSON number every client reads")
        XCTAssertLessThan(zip(ids, ids.dropFirst()).filter { $1 == $0 &+ 1 }.count, 10, "not a counter")
        XCTAssertEqual(PromptIDs.permuted(7, key: .none), 7, "no key: the tests' 1, 2, ...")

        // The old attack: undo the unkeyed mixing, and the XOR of two decoded ids is the XOR of their counts.
        var g = SystemRandomNumberGenerator()
        var revealed = 0
        var differences = Set<UInt32>()
        for _ in 0..<200 {
            let k = PromptIDKey(g.next(), g.next())
            let (six, eight) = (PromptIDs.permuted(6, key: k), PromptIDs.permuted(8, key: k))
            if Self.undoOldMixing(six) ^ Self.undoOldMixing(eight) == 6 ^ 8 { revealed += 1 }
            differences.insert(six ^ eight)
        }
        XCTAssertLessThan(revealed, 3, "the counts' difference is not in the ids")
        XCTAssertGreaterThan(differences.count, 190, "the ids' difference depends on the key, not on the counts")
        // One bit of the key changes about half the bits of every id.
        let flipped = PromptIDKey(key.k0 ^ 1, key.k1)
        let changed = (1...1000).map { (PromptIDs.permuted(UInt32($0), key: key) ^ PromptIDs.permuted(UInt32($0), key: flipped)).nonzeroBitCount }
        let mean = Double(changed.reduce(0, +)) / Double(changed.count)
        XCTAssertTrue((13.0...18.0).contains(mean), "\(mean) of 31 bits changed")

        // SipHash-2-4's own test vector (key 00..0f, message 00..07).
        XCTAssertEqual(PromptIDs.sipHash24(PromptIDKey(0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908), 0x0706_0504_0302_0100),
                       0x93F5_F579_9A93_2462)

        let h = EngineHarness(policy: Self.policy, links: [Links.wwan],
                              settings: Engine.Settings(daemonUID: 0, logLevel: .debug, promptIDKey: key))
        let agent = h.connect(makePeer(uid: 0, exe: "/usr/bin/netpermctl", pid: 99))
        _ = h.subscribe(agent, "prompts")
        let maps = h.connect(Peers.maps)
        XCTAssertTrue(h.send(maps, "WAIT").isEmpty)
        let prompt = try XCTUnwrap(h.takeEvents(agent, named: "prompt").first)
        XCTAssertEqual(prompt["id"]?.intValue, Int(PromptIDs.permuted(1, key: key)))
    }

    /// The inverse of the old ids' unkeyed steps (two odd multipliers and two xorshifts on 31 bits): what a user
    /// could compute from an id alone.
    private static func undoOldMixing(_ id: UInt32) -> UInt32 {
        let mask: UInt32 = 0x7FFF_FFFF
        func inverse(_ a: UInt32) -> UInt32 { var x = a; for _ in 0..<5 { x = x &* (2 &- a &* x) }; return x & mask }
        func unshift(_ y: UInt32, _ s: UInt32) -> UInt32 { var x = y; for _ in 0..<3 { x = y ^ (x >> s) }; return x & mask }
        var x = unshift(id, 15)
        x = (x &* inverse(0x297A_2D39)) & mask
        x = unshift(x, 12)
        return (x &* inverse(0x2C1B_3C6D)) & mask
    }

    /// Issue 36, 10: one uid's processes asking for 300 apps opened 300 prompts, burying the agents (and another
    /// user's prompt behind them). At most PromptBook.perScope are open per uid; the rest wait, said once; another
    /// uid's are raised as ever.
    func testPromptsPerUidAreBounded() {
        let apps = (0..<300).map { "[App a\($0)]\nExecutable=/usr/bin/a\($0)\nWWAN=ask\n" }.joined()
        let h = EngineHarness(policy: "[Defaults]\nPromptTimeoutSec=60\n" + apps, links: [Links.wwan])
        let mine = h.connect(makePeer(uid: 4, exe: "/usr/bin/netpermctl", pid: 40))
        let theirs = h.connect(makePeer(uid: 5, exe: "/usr/bin/netpermctl", pid: 50))
        _ = h.subscribe(mine, "prompts")
        _ = h.subscribe(theirs, "prompts")
        for i in 0..<300 {
            _ = h.request(h.connect(makePeer(uid: 4, exe: "/usr/bin/a\(i)", pid: Int32(1000 + i))), "QUERY")
        }
        XCTAssertEqual(h.takeEvents(mine, named: "prompt").count, PromptBook.perScope)
        XCTAssertEqual(h.logged(containing: "256 prompts are open for uid 4's processes").count, 1, "said once")
        _ = h.request(h.connect(makePeer(uid: 5, exe: "/usr/bin/a0", pid: 2000)), "QUERY")
        XCTAssertEqual(h.takeEvents(theirs, named: "prompt").map { $0["app"] }, ["a0"], "another uid is asked as ever")
    }

    /// The last agent leaving turns them back; a second agent leaving first changes nothing.
    func testLastAgentLeaving() {
        let h = harness()
        let watcher = h.connect(Peers.root)
        _ = h.subscribe(watcher, "apps")
        let a1 = h.connectAgent(pid: 10)
        let a2 = h.connectAgent(pid: 11)
        _ = h.take(watcher)
        h.disconnect(a1)
        XCTAssertEqual(h.take(watcher), [])
        h.disconnect(a2)
        let events = h.takeEvents(watcher, named: "app")
        XCTAssertEqual(Set(events.compactMap { $0["app"]?.stringValue }), ["maps", "nav", "tester"])
        XCTAssertTrue(events.allSatisfy { $0["reason"] == "denied" && $0["sources"]?["wwan"] == "no-agent" })
        XCTAssertEqual(h.logged(containing: "no agent listens for prompts").count, 1)
        XCTAssertEqual(h.request(h.connect(), "STATUS")["agents"], 0)
    }

    /// An agent that loses its privilege with a reload is no longer an agent.
    func testAgentLosingPrivilegeIsNoLongerAnAgent() {
        let h = harness()
        let agent = h.connect(Peers.admin)
        _ = h.subscribe(agent, "prompts")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["agents"], 1)
        h.reload(policy: Self.policy.replacingOccurrences(of: "[Defaults]\n", with: "[Defaults]\nAdminGroup=wheel\n"))
        XCTAssertEqual(h.request(h.connect(), "STATUS")["agents"], 0)
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["sources"]?["wwan"], "no-agent")
        _ = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
    }

    // MARK: Prompts

    /// One prompt per app and scope, to every agent, however often the app asks: it asks about every pending
    /// kind at once, on the best usable link they keep the app off. Another uid's process of the same app is asked
    /// on its own (its answer would be its own). (A prompt is raised only while nothing the app may use is usable.)
    func testOnePromptPerAppAndScope() throws {
        let h = harness([Links.wwan, makeLink(5, "wwan1", .wwan, metric: 300)])
        let a1 = h.connectAgent(pid: 10)
        let a2 = h.connectAgent(pid: 11)
        let plain = h.connect(Peers.root)
        _ = h.subscribe(plain)
        let maps = h.connect(Peers.maps)
        _ = h.request(maps, "QUERY")
        _ = h.request(maps, "QUERY")
        _ = h.send(h.connect(makePeer(uid: 1001, exe: "/usr/bin/maps", pid: 501)), "WAIT")
        h.setLinks([Links.wlan, Links.wwan, makeLink(5, "wwan1", .wwan, metric: 300)])
        _ = h.request(h.connect(nav), "QUERY")
        for agent in [a1, a2] {
            let prompts = h.takeEvents(agent, named: "prompt")
            XCTAssertEqual(prompts.map { $0["app"] }, ["maps", "maps", "nav"])
            XCTAssertEqual(prompts.map { $0["uid"] }, [1000, 1001, 1000])
            XCTAssertEqual(prompts.map { $0["kinds"] }, [.array(["wwan"]), .array(["wwan"]), .array(["wifi", "wwan"])])
            XCTAssertEqual(prompts.map { $0["id"] }, [1, 2, 3])
            XCTAssertEqual(prompts.map { $0["link"]?["name"] }, ["wwan1", "wwan1", "wwan1"], "the lowest metric")
            XCTAssertEqual(prompts.first?.keys, ["event", "seq", "id", "app", "uid", "identity", "kind", "kinds", "link",
                                                 "choices", "once_until", "timeout_sec", "for_uid", "user_named"])
            XCTAssertEqual(prompts.first?["identity"], .object([("executable", "/usr/bin/maps"), ("unit", .null),
                                                                 ("uid", 1000)]))
            XCTAssertEqual(prompts.first?["link"], .object([("name", "wwan1"), ("kind", "wwan"), ("metered", true), ("roaming", false),
                                                             ("over", .null)]))
            XCTAssertEqual(prompts.first?["choices"]?.arrayValue?.map { $0["label"] }, ["Allow", "Wi-Fi only", "Allow once"])
            XCTAssertEqual(prompts.last?["choices"]?.arrayValue?.map { $0["label"] }, ["Allow", "Deny", "Allow once"])
            XCTAssertEqual(prompts.first?["timeout_sec"], 10)
        }
        XCTAssertEqual(h.takeEvents(plain, named: "prompt"), [], "prompts are for agents")
        XCTAssertEqual(h.logged(containing: "maps wants to use wwan via wwan1 (uid 1000): prompt 1 sent to 2 agent(s)").count, 1)
        // PROMPTS lists the open ones, as the events had them.
        let list = try XCTUnwrap(h.request(h.connect(Peers.admin), "PROMPTS")["prompts"]?.arrayValue)
        XCTAssertEqual(list.map { $0["id"] }, [1, 2, 3])
        XCTAssertEqual(list.first?.keys, ["id", "app", "uid", "identity", "kind", "kinds", "link", "choices", "once_until",
                                          "timeout_sec", "for_uid", "user_named"])
        // A user sees the prompts of their own processes only.
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 1001, exe: "/usr/bin/netpermctl", pid: 70)), "PROMPTS")["prompts"]?
            .arrayValue?.map { $0["id"] }, [2])
    }

    /// `[Defaults] UserDecisions=no`: PROMPTS is for root and the admin group only.
    func testPromptsIsPrivilegedWithoutUserDecisions() {
        let h = EngineHarness(policy: Self.policy.replacingOccurrences(of: "[Defaults]\n", with: "[Defaults]\nUserDecisions=no\n"),
                              links: [Links.wwan])
        XCTAssertEqual(h.requestError(h.connect(Peers.curl), "PROMPTS", .permissionDenied),
                       "PROMPTS needs root or membership of group 'netperm' ([Defaults] UserDecisions=no: users do not "
                       + "decide for their own apps)")
        XCTAssertEqual(h.send(h.connect(Peers.admin), "PROMPTS"), [#"{"ok":true,"prompts":[]}"#])
    }

    /// No answer within PromptTimeoutSec=: `prompt-expired`, nothing stored, the app still awaiting; the next time
    /// it asks, a new prompt.
    func testPromptExpires() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        let maps = h.connect(Peers.maps)
        let mark = h.steps.count
        _ = h.request(maps, "QUERY")
        XCTAssertTrue(h.steps[mark...].contains("arm 1 10000000"), "\(h.steps[mark...])")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [1])
        h.advance(byMicroseconds: 9_999_999)
        XCTAssertEqual(h.take(agent), [])
        h.advance(byMicroseconds: 1)
        let expired = h.takeEvents(agent)
        XCTAssertEqual(expired.map(\.keys), [["event", "seq", "id", "app", "uid", "kind", "kinds"]])
        XCTAssertEqual(expired.first?["event"], "prompt-expired")
        XCTAssertEqual(expired.first?["id"], 1)
        XCTAssertEqual(expired.first?["app"], "maps")
        XCTAssertEqual(expired.first?["kind"], "wwan")
        XCTAssertEqual(h.logged(containing: "prompt 1 for maps (wwan) expired unanswered").count, 1)
        XCTAssertTrue(h.persisted.isEmpty)
        XCTAssertEqual(h.request(h.connect(Peers.admin), "PROMPTS")["prompts"], .array([]))
        XCTAssertEqual(h.request(maps, "QUERY")["reason"], "awaiting-decision")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [2])
    }

    /// DECIDE answers the open prompt of that app about that kind: `prompt-answered`, then the app's event; its
    /// expiry timer is cancelled. The app's other pending kind is asked the next time it asks.
    func testDecideClosesThePromptAndCancelsItsExpiry() {
        let h = harness([Links.wlan, Links.wwan], agents: true)
        let agent = h.connections.keys.max()!
        let navConnection = h.connect(nav)
        _ = h.request(navConnection, "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["kinds"] }, [.array(["wifi", "wwan"])])
        XCTAssertEqual(h.armedTimers, 1)
        let mark = h.steps.count
        XCTAssertEqual(h.request(h.connect(), "DECIDE nav wifi allow --once")["ok"], true)
        XCTAssertEqual(h.steps[mark...].filter { $0.hasPrefix("cancel") }, ["cancel 1"])
        let events = h.takeEvents(agent)
        XCTAssertEqual(events.map { $0["event"] }, ["prompt-answered"])
        XCTAssertEqual(events.first?.keys, ["event", "seq", "id", "app", "uid", "kind", "kinds", "decision", "once", "for_uid"])
        XCTAssertEqual(events.first?["id"], 1)
        XCTAssertEqual(events.first?["app"], "nav")
        XCTAssertEqual(events.first?["decision"], "allow")
        XCTAssertEqual(events.first?["once"], true)
        XCTAssertEqual(events.first?["for_uid"], .null)
        XCTAssertEqual(h.armedTimers, 0)
        XCTAssertEqual(h.request(navConnection, "QUERY")["reason"], "ok", "Wi-Fi is allowed now")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "nothing to ask while a link it may use works")
        // A lasting deny of the other answers nothing open; an agent subscribed to apps hears the app change.
        _ = h.subscribe(agent, "apps prompts")
        XCTAssertEqual(h.request(h.connect(), "DECIDE nav wwan deny")["ok"], true)
        XCTAssertEqual(h.takeEvents(agent).map { $0["event"] }, ["app"])
        h.advance(bySeconds: 60)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired"), [])
    }

    /// A DECIDE with no prompt open answers none, and a prompt's kind decided for another app stays open.
    func testDecideForAnotherAppOrKindLeavesThePromptOpen() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        _ = h.request(h.connect(Peers.maps), "QUERY")
        _ = h.take(agent)
        XCTAssertEqual(h.request(h.connect(), "DECIDE nav wwan allow")["ok"], true)
        XCTAssertEqual(h.request(h.connect(), "DECIDE maps wifi deny")["ok"], true)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-answered"), [])
        XCTAssertEqual(h.request(h.connect(Peers.admin), "PROMPTS")["prompts"]?.arrayValue?.map { $0["app"] }, ["maps"])
    }

    // MARK: Rejected packets (Mode=block)

    /// A packet the kernel rejected and logged for a pending app and kind raises its prompt as if the app had
    /// asked, marked `"source":"blocked"`; more packets while it is open raise nothing; DECIDE answers it.
    func testBlockedPacketRaisesOnePrompt() throws {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        rejected(h)
        let prompts = h.takeEvents(agent, named: "prompt")
        XCTAssertEqual(prompts.map { $0["app"] }, ["maps"])
        XCTAssertEqual(prompts.map { $0["kind"] }, ["wwan"])
        XCTAssertEqual(prompts.first?["source"], "blocked")
        XCTAssertEqual(prompts.first?["identity"], .null, "a packet names no process")
        XCTAssertEqual(prompts.first?["link"]?["name"], "wwan0")
        XCTAssertEqual(h.logged(containing: "maps wants to use wwan via wwan0 (uid 0) (its traffic was rejected): prompt 1").count, 1)
        for _ in 0..<5 { rejected(h) }
        _ = h.request(h.connect(rootMaps), "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "one open prompt per app and kind, whoever raised it")
        XCTAssertEqual(h.request(h.connect(), "DECIDE maps wwan allow")["ok"], true)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-answered").map { $0["id"] }, [1])
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "decided: a late packet raises nothing")
    }

    /// Nothing for a kind that is denied, allowed, not the app's, or an app the policy does not have (the rules
    /// were loaded before a reload or a decision).
    func testBlockedPacketOfAKindNotPendingRaisesNothing() {
        let h = harness([Links.wlan, Links.wwan, Links.eth], agents: true)
        let agent = h.connections.keys.max()!
        h.feed(.blocked(app: "backup", kind: .wwan, uid: 0, ifindex: nil))
        h.feed(.blocked(app: "maps", kind: .wifi, uid: 0, ifindex: nil))
        h.feed(.blocked(app: "maps", kind: .ethernet, uid: 0, ifindex: nil))
        h.feed(.blocked(app: "nosuchapp", kind: .wwan, uid: 0, ifindex: nil))
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        XCTAssertEqual(h.request(h.connect(Peers.admin), "PROMPTS")["prompts"], .array([]))
        h.feed(.blocked(app: "nav", kind: .wifi, uid: 0, ifindex: nil))
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["link"]?["name"] }, ["wlan0"])
    }

    /// With no agent, nobody can be asked: no prompt, and the log says so once per app and kind.
    func testBlockedPacketWithNoAgentIsLoggedOnce() {
        let h = harness()
        for _ in 0..<3 { rejected(h) }
        XCTAssertEqual(h.request(h.connect(Peers.admin), "PROMPTS")["prompts"], .array([]))
        XCTAssertEqual(h.logged(containing: "maps may not use wwan, which its policy sets to ask: its traffic was "
            + "rejected and no agent is listening").count, 1)
        _ = h.request(h.connect(Peers.maps), "QUERY")
        XCTAssertEqual(h.logged(containing: "maps may not use wwan").count, 1, "one line per app and kind, whatever raised it")
    }

    /// A prompt that expired unanswered is not raised again by packets for a quiet minute; asking raises it at once.
    func testExpiredPromptIsQuietForAMinute() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [1])
        h.advance(bySeconds: 10)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired").map { $0["id"] }, [1])
        rejected(h)
        h.advance(bySeconds: 59)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [])
        h.advance(bySeconds: 1)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [2])
    }

    /// The quiet minute runs from the last expiry: a prompt the app raised by asking during the quiet and left to
    /// expire starts it again (the fuzz target's `.blocked` input found it running from the first).
    func testQuietRestartsAtEachExpiry() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        rejected(h)
        h.advance(bySeconds: 11)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired").map { $0["id"] }, [1])
        _ = h.request(h.connect(rootMaps), "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [2])
        h.advance(bySeconds: 10)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt-expired").map { $0["id"] }, [2])
        h.advance(bySeconds: 50)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "60 s after the first expiry, 50 s after the last")
        h.advance(bySeconds: 10)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [3])
    }

    /// A dismissed question (its notification closed unanswered) closes at once, stores nothing, and is quiet for
    /// a minute from the dismiss, not from an expiry the person never sees; the app asking raises it again at once.
    func testADismissedPromptClosesAtOnceAndIsQuietForAMinute() {
        let h = harness(agents: true)
        let agent = h.connections.keys.max()!
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [1])
        let got = h.send(agent, "ANSWER 1 dismiss").map(EngineHarness.parse)
        XCTAssertEqual(got.first { $0["event"] == nil }?["dismissed"]?["id"], 1)
        XCTAssertEqual(got.filter { $0["event"] == "prompt-withdrawn" }.map { $0["why"] }, ["dismissed"])
        XCTAssertEqual(h.request(agent, "PROMPTS")["prompts"], .array([]))
        XCTAssertTrue(h.persisted.isEmpty)
        XCTAssertEqual(h.armedTimers, 1, "only the quiet minute: the expiry went with the prompt")
        XCTAssertNotNil(h.requestError(agent, "ANSWER 1 allow", .notFound))
        XCTAssertNotNil(h.requestError(agent, "ANSWER 1 dismiss", .notFound))
        XCTAssertNotNil(h.requestError(agent, "ANSWER 1 dismiss --everyone", .badArguments))
        h.advance(bySeconds: 59)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt"), [], "quiet for a minute after the dismiss")
        h.advance(bySeconds: 1)
        rejected(h)
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [2])
        _ = h.request(agent, "ANSWER 2 dismiss")
        _ = h.request(h.connect(rootMaps), "QUERY")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["id"] }, [3], "asking raises it at once")
    }

    /// A packet of root's maps over WWAN, rejected and logged by the rules.
    private func rejected(_ h: EngineHarness) { h.feed(.blocked(app: "maps", kind: .wwan, uid: 0, ifindex: nil)) }
}
