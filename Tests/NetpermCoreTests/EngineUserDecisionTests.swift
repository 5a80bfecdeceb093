// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// Users deciding for their own apps (`[Defaults] UserDecisions=yes`, docs/SECURITY.md): a user's agent hears the
/// prompts of that uid's processes only and answers them for that uid alone; another uid's same app is still asked;
/// root and the admin group answer for everyone; `UserDecisions=no` restores the old rule.
final class EngineUserDecisionTests: XCTestCase {
    private let policy = """
    [App maps]
    Executable=/usr/bin/maps
    WWAN=ask
    """

    private let alice = makePeer(uid: 1000, exe: "/usr/bin/maps", pid: 500)
    private let bob = makePeer(uid: 1002, exe: "/usr/bin/maps", pid: 510)

    private func agent(_ h: EngineHarness, uid: UInt32, pid: Int32) -> ConnectionID {
        let c = h.connect(makePeer(uid: uid, exe: "/usr/bin/netpermctl", pid: pid))
        _ = h.subscribe(c, "prompts")
        return c
    }

    func testAUsersAgentAnswersTheirOwnProcessesOnly() {
        let h = EngineHarness(policy: policy, links: [Links.wwan])
        let aliceAgent = agent(h, uid: 1000, pid: 80)
        let bobAgent = agent(h, uid: 1002, pid: 81)
        let aliceApp = h.connect(alice)
        let bobApp = h.connect(bob)
        XCTAssertEqual(h.request(aliceApp, "QUERY")["reason"], "awaiting-decision")
        XCTAssertEqual(h.request(bobApp, "QUERY")["reason"], "awaiting-decision")
        let a = h.takeEvents(aliceAgent, named: "prompt")
        let b = h.takeEvents(bobAgent, named: "prompt")
        XCTAssertEqual(a.map { $0["uid"] }, [1000], "alice's agent sees alice's prompt only")
        XCTAssertEqual(b.map { $0["uid"] }, [1002])
        let aliceID = a.first?["id"]?.intValue ?? 0, bobID = b.first?["id"]?.intValue ?? 0
        XCTAssertEqual(h.request(bobAgent, "PROMPTS")["prompts"]?.arrayValue?.map { $0["id"] }, [.int(bobID)])

        // Bob cannot answer alice's prompt, not even by its id: it is not his to see.
        XCTAssertTrue(h.requestError(bobAgent, "ANSWER \(aliceID) allow", .notFound).hasPrefix("prompt \(aliceID) is not open"))
        XCTAssertTrue(h.persisted.isEmpty)

        // Alice allows: for her uid's processes only.
        let got = h.send(aliceAgent, "ANSWER \(aliceID) allow").map(EngineHarness.parse)
        let r = got.last ?? .null
        XCTAssertEqual(got.dropLast().map { $0["id"] }, [.int(aliceID)], "prompt-answered, to alice's agent")
        XCTAssertEqual(r["answered"]?["for_uid"], 1000)
        XCTAssertEqual(r["sources"]?["wwan"], "user-decision")
        XCTAssertEqual(h.persisted.last?.decision("maps", .wwan, uid: 1000)?.1, .userDecision)
        XCTAssertNil(h.persisted.last?.decision("maps", .wwan), "not for everyone")
        XCTAssertEqual(h.persisted.last?.encoded(), """
            # netpermd's stored decisions, written by the daemon (netpermctl decide / forget).

            [User 1000 maps]
            WWAN=allow

            """)
        XCTAssertEqual(h.request(aliceApp, "QUERY")["reason"], "ok")
        XCTAssertEqual(h.request(bobApp, "QUERY")["reason"], "awaiting-decision", "bob's maps is still asked")
        XCTAssertEqual(h.takeEvents(bobAgent, named: "prompt-answered"), [], "bob's prompt is still open")
        XCTAssertEqual(h.request(h.connect(), "QUERY maps")["sources"]?["wwan"], "no-agent",
                       "everyone's verdict: nobody answers for everyone")
    }

    /// A privileged agent sees every uid's prompts. Its answer to one a user's process raised is for that uid (one
    /// user's word, a unit they named like the app, must not open the app for everyone), unless it answers
    /// `--everyone`, which closes every open prompt about those kinds; a user cannot answer for everyone.
    func testAPrivilegedAnswerIsForTheAskersUidUnlessForEveryone() {
        let h = EngineHarness(policy: policy, links: [Links.wwan], agents: true)
        let root = h.connections.keys.max()!
        let aliceAgent = agent(h, uid: 1000, pid: 80)
        _ = h.request(h.connect(alice), "QUERY")
        _ = h.request(h.connect(bob), "QUERY")
        let prompts = h.takeEvents(root, named: "prompt")
        XCTAssertEqual(prompts.map { $0["uid"] }, [1000, 1002])
        XCTAssertEqual(prompts.map { $0["for_uid"] }, [1000, 1002], "whose decision each asks for")
        XCTAssertEqual(h.requestError(aliceAgent, "ANSWER 1 deny --everyone", .permissionDenied),
                       "only root or members of group 'netperm' answer for everyone; a user answers for their own processes")
        let got = h.send(root, "ANSWER 1 deny").map(EngineHarness.parse)
        XCTAssertEqual(got.last?["answered"]?["for_uid"], 1000)
        XCTAssertEqual(got.filter { $0["event"] == "prompt-answered" }.map { $0["id"] }, [1], "bob's stays open")
        XCTAssertEqual(h.takeEvents(aliceAgent, named: "prompt-answered").map { $0["for_uid"] }, [1000])
        XCTAssertEqual(h.request(h.connect(alice), "QUERY")["sources"]?["wwan"], "user-decision")
        XCTAssertEqual(h.request(h.connect(bob), "QUERY")["reason"], "awaiting-decision")
        XCTAssertNil(h.persisted.last?.decision("maps", .wwan), "nothing for everyone")
        let all = h.send(root, "ANSWER 2 allow --everyone").map(EngineHarness.parse)
        XCTAssertEqual(all.last?["answered"]?["for_uid"], .null)
        XCTAssertEqual(h.persisted.last?.decision("maps", .wwan)?.0, .allow)
        XCTAssertEqual(h.request(h.connect(bob), "QUERY")["sources"]?["wwan"], "decision")
        XCTAssertEqual(h.request(h.connect(alice), "QUERY")["sources"]?["wwan"], "decision", "everyone's decision comes first")
    }

    /// Who named what: an app recognised by a unit of its user's own service manager (`UserUnit=`) was named by
    /// that user, not by the policy's author; its prompts say so (`user_named`), asked or raised by a rejected packet
    /// of a uid the app's `User=` does not name, and an admin's plain answer stays that uid's.
    func testAUserNamedAppsPromptSaysSo() {
        let policy = "[App firefox]\nUserUnit=app-firefox*.scope\nUser=1003\nWWAN=ask\n"
        let h = EngineHarness(policy: policy, links: [Links.wwan], agents: true)
        let root = h.connections.keys.max()!
        var claimed = PeerIdentity(pid: 600, uid: 1004, gids: [1004], executable: "/usr/bin/socat",
                                   unit: "app-firefox-x2.scope")
        claimed.userUnit = true
        let app = h.connect(claimed)
        XCTAssertEqual(h.request(app, "QUERY")["app"], "firefox")
        let asked = h.takeEvents(root, named: "prompt")
        XCTAssertEqual(asked.map { $0["user_named"] }, [true])
        XCTAssertEqual(asked.map { $0["for_uid"] }, [1004])
        XCTAssertEqual(h.request(root, "ANSWER \(asked[0]["id"]!.intValue!) allow")["answered"]?["for_uid"], 1004)
        XCTAssertNil(h.persisted.last?.decision("firefox", .wwan), "not for everyone's firefox")
        // A rejected packet of uid 1005 (no User= of firefox): out of its own unit.
        h.feed(.blocked(app: "firefox", kind: .wwan, uid: 1005, ifindex: Links.wwan.index))
        XCTAssertEqual(h.takeEvents(root, named: "prompt").map { $0["user_named"] }, [true])
        // uid 1003 is firefox's by the policy's own User=: nobody but the admin named it.
        h.feed(.blocked(app: "firefox", kind: .wwan, uid: 1003, ifindex: Links.wwan.index))
        XCTAssertEqual(h.takeEvents(root, named: "prompt").map { $0["user_named"] }, [false])
    }

    /// A rejected packet's socket owner is the prompt's uid: that user's agent is asked, for that uid.
    func testARejectedPacketIsItsSocketOwnersPrompt() {
        let h = EngineHarness(policy: policy, links: [Links.wwan])
        let aliceAgent = agent(h, uid: 1000, pid: 80)
        let bobAgent = agent(h, uid: 1002, pid: 81)
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 1000, ifindex: 4))
        XCTAssertEqual(h.takeEvents(aliceAgent, named: "prompt").map { $0["uid"] }, [1000])
        XCTAssertEqual(h.takeEvents(bobAgent, named: "prompt"), [])
        // Nobody can be asked about root's packets: logged, no prompt.
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 0, ifindex: 4))
        XCTAssertEqual(h.takeEvents(aliceAgent, named: "prompt"), [])
        XCTAssertEqual(h.logged(containing: "maps may not use wwan, which its policy sets to ask: its traffic was rejected").count, 1)
        // Decided by alice: her packets are not pending any more.
        XCTAssertEqual(h.request(aliceAgent, "ANSWER 1 allow")["ok"], true)
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 1000, ifindex: 4))
        XCTAssertEqual(h.takeEvents(aliceAgent, named: "prompt"), [])
    }

    /// `[Defaults] UserDecisions=no`: users neither subscribe to prompts nor answer; a user's app asks everyone's
    /// question, to privileged agents, and its verdict is everyone's.
    func testUserDecisionsNoRestoresTheOldRule() {
        let off = policy + "\n[Defaults]\nUserDecisions=no\n"
        var d = Decisions()
        d.set("maps", .wwan, .allow, once: false, uid: 1000)
        let h = EngineHarness(policy: off, links: [Links.wwan], agents: true, decisions: d)
        let root = h.connections.keys.max()!
        let user = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 80))
        XCTAssertEqual(h.requestError(user, "SUBSCRIBE prompts", .permissionDenied).prefix(28), "only root or members of grou")
        let q = h.request(h.connect(alice), "QUERY")
        XCTAssertEqual(q["reason"], "awaiting-decision", "a stored user decision does not apply")
        XCTAssertEqual(q["sources"]?["wwan"], "policy")
        XCTAssertEqual(h.takeEvents(root, named: "prompt").map { $0["uid"] }, [1000])
        _ = h.request(h.connect(bob), "QUERY")
        XCTAssertEqual(h.takeEvents(root, named: "prompt"), [], "one prompt per app: the answer is everyone's")
        XCTAssertEqual(h.requestError(user, "ANSWER 1 allow", .permissionDenied).prefix(6), "ANSWER")
        XCTAssertEqual(h.request(h.connect(), "APPS")["apps"]?.arrayValue?.first?["user_decisions"], nil)
        // Turned on again: alice's own decision applies once more.
        h.reload(policy: policy)
        XCTAssertEqual(h.request(h.connect(alice), "QUERY")["sources"]?["wwan"], "user-decision")
        XCTAssertEqual(h.request(h.connect(), "APPS")["apps"]?.arrayValue?.first?["user_decisions"]?.arrayValue?.count, 1)
    }

    /// An unprivileged subscriber hears its own app as its uid has it: its own decision's event, not everyone's.
    func testASubscriberHearsItsAppAsItsUidHasIt() {
        let h = EngineHarness(policy: policy, links: [Links.wwan], agents: true)
        let sub = h.connect(alice)
        let (_, snapshot) = h.subscribe(sub, "apps")
        XCTAssertEqual(snapshot["apps"]?.arrayValue?.map { $0["reason"] }, ["awaiting-decision"])
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 90)),
                                 "DECIDE maps wwan allow")["ok"], true)
        let events = h.takeEvents(sub, named: "app")
        XCTAssertEqual(events.map { $0["sources"]?["wwan"] }, ["user-decision"])
        let watcher = h.connect()
        _ = h.subscribe(watcher, "apps")
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 90)),
                                 "FORGET maps")["forgotten"], true)
        XCTAssertEqual(h.takeEvents(watcher, named: "app"), [], "everyone's verdict did not change")
        XCTAssertEqual(h.takeEvents(sub, named: "app").map { $0["reason"] }, ["awaiting-decision"])
    }

    /// Mode=block: a user's answer changes their uid's element only (a change of elements, not the whole table);
    /// `UserDecisions=no` takes it out of the kernel again.
    func testAUsersAnswerIsTheirUidsElementInTheKernel() {
        let block = "[Enforcement]\nMode=block\n[App maps]\nUser=1000 1002\nWWAN=ask\n"
        let h = EngineHarness(policy: block, links: [Links.wwan])
        XCTAssertTrue(h.rules.last?.contains("1000 : goto ask_") == true, h.rules.last ?? "")
        let a = agent(h, uid: 1000, pid: 80)
        h.feed(.blocked(app: "maps", kind: .wwan, uid: 1000, ifindex: 4))
        XCTAssertEqual(h.takeEvents(a, named: "prompt").map { $0["uid"] }, [1000])
        XCTAssertEqual(h.request(a, "ANSWER 1 allow")["ok"], true)
        XCTAssertFalse(h.rules.last?.contains("1000 : goto ask_") == true, "uid 1000's element is gone: it allows")
        XCTAssertTrue(h.rules.last?.contains("1002 : goto ask_") == true, "uid 1002 is still asked")
        XCTAssertEqual(h.scripts.last, "delete element inet netpermd uid_wwan { 1000 }\n")
        h.reload(policy: block + "[Defaults]\nUserDecisions=no\n")
        XCTAssertTrue(h.rules.last?.contains("1000 : goto ask_") == true, "user decisions off: asked again")
    }

    /// A user's own allow never widens what the policy denies: the policy's deny holds for their processes too, in
    /// QUERY and in the kernel's rules.
    func testAUsersAllowNeverWidensThePolicysDeny() {
        let h = EngineHarness(policy: "[Enforcement]\nMode=block\n[App maps]\nUser=1000\nWiFi=deny\nWWAN=ask\n", links: [Links.wlan])
        let rules = h.rules.last
        let app = h.connect(alice)
        let r = h.request(app, "DECIDE maps wifi allow")
        XCTAssertEqual(r["decided"]?["for_uid"], 1000)
        XCTAssertEqual(r["decided"]?["overridden_by_policy"], true)
        XCTAssertEqual(r["reason"], "denied")
        XCTAssertEqual(r["sources"]?["wifi"], "policy")
        XCTAssertEqual(h.request(app, "QUERY")["reason"], "denied")
        XCTAssertNotNil(rules)
        XCTAssertEqual(h.rules.last, rules, "the kernel's rules are as they were")
    }

    /// Any local user may decide for their own apps, and each decision is kept: at most `Engine.maxOwnApps` apps
    /// per uid; deciding again for one of them is still taken; another uid and everyone's decisions are not bounded
    /// by it.
    func testAUsersOwnDecisionsAreBounded() {
        let h = EngineHarness(policy: policy, links: [Links.wwan])
        let user = h.connect(makePeer(uid: 1000, exe: "/usr/bin/netpermctl", pid: 80))
        for i in 0..<Engine.maxOwnApps {
            XCTAssertEqual(h.request(user, "DECIDE app\(i) wwan allow --once")["ok"], true)
        }
        XCTAssertTrue(h.requestError(user, "DECIDE one-more wwan allow", .tooManyDecisions)
            .hasPrefix("uid 1000 has decided for \(Engine.maxOwnApps) apps"))
        XCTAssertTrue(h.persisted.isEmpty, "nothing was stored")
        XCTAssertEqual(h.request(user, "DECIDE app0 metered deny")["ok"], true, "an app already decided for")
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 1002, exe: "/usr/bin/netpermctl", pid: 81)),
                                 "DECIDE one-more wwan allow")["ok"], true)
        XCTAssertEqual(h.request(h.connect(Peers.admin), "DECIDE one-more wwan allow")["ok"], true)
        XCTAssertEqual(h.request(user, "FORGET app1")["forgotten"], true)
        XCTAssertEqual(h.request(user, "DECIDE one-more wwan allow")["ok"], true, "room again")
    }

    func testDecisionsFileRoundTripsUsersOwn() throws {
        var d = Decisions()
        d.set("maps", .wwan, .allow, once: false)
        d.set("maps", .metered, .deny, once: false, uid: 1000)
        d.set("nav", .wifi, .allow, once: true, uid: 1000)
        let text = d.encoded()
        XCTAssertTrue(text.hasSuffix("[App maps]\nWWAN=allow\n\n[User 1000 maps]\nMetered=deny\n"), text)
        var lasting = d
        lasting.dropOnce()
        XCTAssertEqual(try Decisions.parse(text, path: "d"), lasting)
        for bad in ["[User maps]\nWWAN=allow\n", "[User 1000]\nWWAN=allow\n", "[User 01000 maps]\nWWAN=allow\n",
                    "[User -1 maps]\nWWAN=allow\n", "[User 1000 1maps]\nWWAN=allow\n"] {
            XCTAssertThrowsError(try Decisions.parse(bad, path: "d"), bad)
        }
        XCTAssertEqual(d.entries().map { "\($0.app) \($0.kind.rawValue) \($0.once) \($0.uid.map(String.init) ?? "-")" },
                       ["maps wwan false -", "maps metered false 1000", "nav wifi true 1000"])
        XCTAssertEqual(d.entries(onlyUID: 1000).count, 2)
        XCTAssertTrue(d.forget("maps", kind: nil, uid: 1000))
        XCTAssertEqual(d.entries().count, 2)
        XCTAssertTrue(d.forget("nav", kind: nil))
        XCTAssertEqual(d.entries().count, 1, "everyone's forget reaches users' own")
    }
}
