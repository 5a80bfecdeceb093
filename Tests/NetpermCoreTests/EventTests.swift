// SPDX-License-Identifier: LGPL-2.1-or-later
import XCTest
// Prompt's memberwise initializer is internal: the engine is the only one that makes prompts.
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

/// Link events from comparing two pictures of the network.
final class LinkEventTests: XCTestCase {
    func testAddedChangedRemoved() {
        let eth = makeLink(2, "eth0", .ethernet, metric: 100)
        let wlan = makeLink(3, "wlan0", .wifi, metric: 600)
        let lo = makeLink(1, "lo", .loopback, metric: nil)
        let old = NetworkState(routedLinks: [lo, eth, wlan])
        let eth2 = makeLink(2, "eth0", .ethernet, metric: nil)
        let wwan = makeLink(4, "wwan0", .wwan, metric: 700)
        let new = NetworkState(routedLinks: [lo, wwan, eth2])
        XCTAssertEqual(Event.linkChanges(from: old, to: new),
                       [.link(.changed, eth2), .link(.added, wwan), .link(.removed, wlan)])
    }

    func testNoEventWhenUnchanged() {
        let s = NetworkState(routedLinks: [makeLink(1, "lo", .loopback, metric: nil), makeLink(2, "eth0", .ethernet)])
        XCTAssertEqual(Event.linkChanges(from: s, to: s), [])
        XCTAssertEqual(Event.linkChanges(from: NetworkState(), to: NetworkState()), [])
        // Same content, built separately.
        XCTAssertEqual(Event.linkChanges(from: s, to: NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet),
                                                                           makeLink(1, "lo", .loopback, metric: nil)])),
                       [])
    }

    func testEveryReportedFieldCounts() {
        let base = makeLink(2, "eth0", .ethernet)
        var variants: [Link] = []
        var l = base; l.name = "lan0"; variants.append(l)
        l = base; l.kind = .other; variants.append(l)
        l = base; l.metered = true; variants.append(l)
        l = base; l.status.carrier = false; variants.append(l)
        l = base; l.status.adminUp = false; variants.append(l)
        l = base; l.status.operstate = "dormant"; variants.append(l)
        l = base; l.addresses = ["192.0.2.1/24"]; variants.append(l)
        l = base; l.defaultRoute.ipv6 = true; variants.append(l)
        l = base; l.metric = 5; variants.append(l)
        l = base; l.classifiedBy = "config:[Interface eth0]"; variants.append(l)
        for v in variants {
            XCTAssertEqual(Event.linkChanges(from: NetworkState(routedLinks: [base]), to: NetworkState(routedLinks: [v])),
                           [.link(.changed, v)])
        }
    }

    func testFromAndToNothing() {
        let links = [makeLink(2, "eth0", .ethernet), makeLink(3, "wlan0", .wifi)]
        XCTAssertEqual(Event.linkChanges(from: NetworkState(), to: NetworkState(routedLinks: links)),
                       links.map { .link(.added, $0) })
        XCTAssertEqual(Event.linkChanges(from: NetworkState(routedLinks: links), to: NetworkState()),
                       links.map { .link(.removed, $0) })
    }

    func testEventTopicsAndNames() {
        let l = makeLink(2, "eth0", .ethernet)
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: NetworkState(), ready: true)
        XCTAssertEqual(Event.link(.added, l).topic, .links)
        XCTAssertEqual(Event.app(v).topic, .apps)
        XCTAssertEqual(Event.policy(generation: 1, apps: 0, error: nil).topic, .policy)
        XCTAssertEqual(Event.link(.added, l).name.rawValue, "link")
        XCTAssertEqual(Event.app(v).name.rawValue, "app")
        XCTAssertEqual(Event.policy(generation: 1, apps: 0, error: nil).name.rawValue, "policy")
        let p = Prompt(id: 1, app: "a", scope: nil, uid: 0, identity: nil, kinds: [.wwan], link: PromptLink(name: "wwan0", kind: .wwan,
                       metered: true))
        let all: [Event] = [.prompt(p), .promptExpired(p), .promptAnswered(p, .allow, once: false, uid: nil), .promptWithdrawn(p, why: .askerExited)]
        XCTAssertEqual(all.map(\.topic), [.prompts, .prompts, .prompts, .prompts])
        XCTAssertEqual((all + [.stopping]).map(\.name.rawValue),
                       ["prompt", "prompt-expired", "prompt-answered", "prompt-withdrawn", "stopping"])
        XCTAssertNil(Event.stopping.topic, "every subscriber hears it")
    }
}

/// One subscriber's topics, filter and sequence numbers, and the lines it is sent.
final class SubscriptionTests: XCTestCase {
    private func topics(_ args: [String]) -> Set<Topic>? {
        if case let .success(t) = Topic.set(from: args) { return t }
        return nil
    }

    func testTopicsParsing() {
        XCTAssertEqual(topics([]), [.links, .apps, .policy], "prompts only when asked for")
        XCTAssertEqual(topics(["prompts"]), [.prompts])
        XCTAssertEqual(topics(["links"]), [.links])
        XCTAssertEqual(topics(["APPS", "Policy"]), [.apps, .policy])
        XCTAssertEqual(topics(["apps", "apps"]), [.apps])
        guard case let .failure(e) = Topic.set(from: ["links", "bogus"]) else {
            return XCTFail("expected an error")
        }
        XCTAssertEqual(e.code, .badArguments)
        XCTAssertEqual(e.message, "unknown topic 'bogus' (expected links, apps, policy, prompts, self, usage, mine, scopes)")
    }

    private func verdict(_ app: String, ready: Bool = true) -> Verdict {
        Verdict.compute(app: app, matchedBy: .executable, permissions: .builtIn,
                        network: NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)]), ready: ready)
    }

    private let prompt = Prompt(id: 1, app: "me", scope: nil, uid: 0, identity: nil, kinds: [.wwan], link: PromptLink(name: "wwan0",
                                kind: .wwan, metered: true))
    /// The same question about uid 1000's processes (raised by one of them, user decisions on).
    private let ownPrompt = Prompt(id: 2, app: "me", scope: 1000, uid: 1000, identity: nil, kinds: [.wwan, .metered],
                                   link: PromptLink(name: "wwan0", kind: .wwan, metered: true))

    func testUnprivilegedSeesOnlyItsOwnApp() {
        let s = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me")
        XCTAssertTrue(s.wants(.app(verdict("me"))))
        XCTAssertFalse(s.wants(.app(verdict("other"))))
        XCTAssertFalse(s.wants(.app(verdict("me2"))))
        XCTAssertTrue(s.wants(.link(.added, makeLink(2, "eth0", .ethernet))))
        XCTAssertTrue(s.wants(.policy(generation: 2, apps: 1, error: nil)))
        // Prompts are for the privileged, even about the subscriber's own app.
        XCTAssertFalse(s.wants(.prompt(prompt)))
        XCTAssertFalse(s.wants(.promptExpired(prompt)))
        XCTAssertFalse(s.wants(.promptAnswered(prompt, .deny, once: true, uid: nil)))
        XCTAssertFalse(s.isAgent)
    }

    /// With user decisions, an unprivileged subscriber of prompts is its uid's agent: its own uid's prompts, never
    /// another's or everyone's; and its app as its uid has it, not as everyone's.
    func testAUsersAgentSeesOnlyItsOwnUidsPrompts() {
        let s = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me", ownUID: 1000)
        XCTAssertTrue(s.isAgent)
        for e in [Event.prompt(ownPrompt), .promptExpired(ownPrompt), .promptWithdrawn(ownPrompt, why: .dismissed),
                  .promptAnswered(ownPrompt, .allow, once: false, uid: 1000)] {
            XCTAssertTrue(s.wants(e), "\(e)")
        }
        var other = ownPrompt
        other.scope = 1001
        other.uid = 1001
        XCTAssertFalse(s.wants(.prompt(other)))
        XCTAssertFalse(s.wants(.prompt(prompt)), "everyone's prompt is for privileged agents")
        var own = verdict("me")
        own.uid = 1000
        XCTAssertTrue(s.wants(.app(own)))
        XCTAssertFalse(s.wants(.app(verdict("me"))), "everyone's verdict is not its uid's")
        let privileged = Subscription(topics: Set(Topic.allCases), privileged: true, appID: "me")
        XCTAssertTrue(privileged.wants(.prompt(other)))
        XCTAssertFalse(privileged.wants(.app(own)), "a privileged subscriber hears everyone's verdicts")
        XCTAssertFalse(Subscription(topics: Topic.defaults, privileged: false, appID: "me", ownUID: 1000).isAgent)
    }

    func testPrivilegedSeesEveryApp() {
        let s = Subscription(topics: Set(Topic.allCases), privileged: true, appID: "me")
        XCTAssertTrue(s.wants(.app(verdict("me"))))
        XCTAssertTrue(s.wants(.app(verdict("other"))))
        XCTAssertTrue(s.wants(.prompt(prompt)))
        XCTAssertTrue(s.isAgent)
        XCTAssertFalse(Subscription(topics: Topic.defaults, privileged: true, appID: "me").isAgent)
    }

    /// `self`: the subscriber's own app, privileged or not, and nothing else of the apps topic.
    func testSelfIsTheOwnAppOnly() {
        XCTAssertEqual(topics(["self"]), [.own])
        for privileged in [false, true] {
            let s = Subscription(topics: [.own], privileged: privileged, appID: "me")
            XCTAssertTrue(s.wants(.app(verdict("me"))), "privileged: \(privileged)")
            XCTAssertFalse(s.wants(.app(verdict("other"))), "privileged: \(privileged)")
            XCTAssertFalse(s.wants(.link(.added, makeLink(2, "eth0", .ethernet))))
            XCTAssertFalse(s.wants(.policy(generation: 2, apps: 1, error: nil)))
            XCTAssertTrue(s.wants(.stopping))
        }
        let both = Subscription(topics: [.own, .apps], privileged: true, appID: "me")
        XCTAssertTrue(both.wants(.app(verdict("other"))))
    }

    func testTopicsFilter() {
        let linksOnly = Subscription(topics: [.links], privileged: true, appID: "me")
        XCTAssertTrue(linksOnly.wants(.link(.removed, makeLink(2, "eth0", .ethernet))))
        XCTAssertFalse(linksOnly.wants(.app(verdict("me"))))
        XCTAssertFalse(linksOnly.wants(.policy(generation: 2, apps: 1, error: nil)))
        XCTAssertFalse(linksOnly.wants(.prompt(prompt)))
        XCTAssertTrue(linksOnly.wants(.stopping))
        let apps = Subscription(topics: [.apps, .policy], privileged: false, appID: "me")
        XCTAssertFalse(apps.wants(.link(.removed, makeLink(2, "eth0", .ethernet))))
        XCTAssertTrue(apps.wants(.app(verdict("me"))))
        XCTAssertTrue(apps.wants(.policy(generation: 2, apps: 1, error: "x")))
        XCTAssertTrue(apps.wants(.stopping))
    }

    /// A subscriber's line for an event: its head, then the members every subscriber shares.
    private func line(_ s: inout Subscription, _ e: Event) -> String {
        let b = ByteBuffer(capacity: 64)
        s.writeHead(e.name, into: b)
        var w = JSONWriter(continuing: b)
        e.writeMembers(to: &w)
        w.close()
        return String(decoding: UnsafeBufferPointer(start: b.base, count: b.count), as: UTF8.self)
    }

    private func members(_ text: String, file: StaticString = #filePath, line l: UInt = #line) throws -> [(String, JSON)] {
        guard case let .object(m) = try JSONParser.parse(text) else {
            XCTFail("not an object: \(text)", file: file, line: l)
            return []
        }
        return m
    }

    /// `seq` counts every line from 1, each subscriber on its own.
    func testSeqCountsEveryLine() throws {
        var s = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me")
        XCTAssertEqual(s.seq, 0)
        let event = Event.policy(generation: 4, apps: 0, error: nil)
        for expected in 1...5 {
            let m = try members(line(&s, event))
            XCTAssertEqual(m[1].0, "seq")
            XCTAssertEqual(m[1].1, .int(expected))
        }
        XCTAssertEqual(s.seq, 5)
        var other = Subscription(topics: [.policy], privileged: true, appID: "x")
        XCTAssertEqual(try members(line(&other, event))[1].1, 1)
    }

    /// Every kind of event: `{"event":NAME,"seq":N,` then exactly the event's documented fields, valid JSON,
    /// strings escaped.
    func testEveryEventIsOneObjectWithEventAndSeqFirst() throws {
        let link = makeLink(4, "wwan0", .wwan, metric: 700)
        let v = verdict("me")
        let who = PeerIdentity(pid: 3, uid: 1000, gids: [], executable: "/usr/bin/q\"uote", unit: "a.service")
        let p = Prompt(id: 7, app: "me", scope: 1000, uid: 1000, identity: who, kinds: [.wwan, .metered], link: PromptLink(name: "wwan0",
                       kind: .wwan, metered: true))
        let blocked = Prompt(id: 8, app: "x", scope: nil, uid: nil, identity: nil, kinds: [.wifi], link: PromptLink(name: "wlan0",
                             kind: .wifi, metered: false), blocked: true)
        let promptFields = ["id", "app", "uid", "identity", "kind", "kinds", "link", "choices", "once_until", "timeout_sec",
                            "for_uid", "user_named"]
        let head = ["id", "app", "uid", "kind", "kinds"]
        let rows: [(Event, [String])] = [
            (.link(.added, link), ["change", "link"]),
            (.link(.changed, link), ["change", "link"]),
            (.link(.removed, link), ["change", "link"]),
            (.app(v), ["app", "available", "reason", "via", "egress", "bind_to", "denied_kinds", "pending_kinds",
                       "permissions", "sources", "enforced", "enforced_why", "message"]),
            (.app(verdict("me", ready: false)), ["app", "available", "reason", "via", "egress", "bind_to",
                                                 "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why", "message"]),
            (.policy(generation: 7, apps: 12, error: nil), ["generation", "apps", "error"]),
            (.policy(generation: 7, apps: 12, error: "/etc/netpermd/netpermd.conf:3: bad \"quoted\"\nvalue"),
             ["generation", "apps", "error"]),
            (.prompt(p), promptFields),
            (.prompt(blocked), ["id", "app", "uid", "identity", "kind", "kinds", "link", "source", "choices", "once_until",
                                "timeout_sec", "for_uid", "user_named"]),
            (.promptExpired(p), head),
            (.promptAnswered(p, .allow, once: true, uid: 1000), head + ["decision", "once", "for_uid"]),
            (.promptWithdrawn(p, why: .askerExited), head + ["why"]),
            (.stopping, []),
        ]
        var s = Subscription(topics: Set(Topic.allCases), privileged: true, appID: "me")
        for (i, (e, fields)) in rows.enumerated() {
            let text = line(&s, e)
            XCTAssertFalse(text.utf8.contains(0x0A), "one line: \(text)")
            let m = try members(text)
            XCTAssertEqual(m.map(\.0), ["event", "seq"] + fields, "\(e)")
            XCTAssertEqual(m[0].1, .string(e.name.rawValue))
            XCTAssertEqual(m[1].1, .int(i + 1))
        }
        let policy = try members(line(&s, .policy(generation: 7, apps: 1, error: "a \"b\"\nc")))
        XCTAssertEqual(policy[4].1, "a \"b\"\nc")
        let prompt = try members(line(&s, .prompt(p)))
        XCTAssertEqual(prompt[5].1, .object([("executable", "/usr/bin/q\"uote"), ("unit", "a.service"), ("uid", 1000)]))
        XCTAssertEqual(prompt[7].1, .array(["wwan", "metered"]))
        XCTAssertEqual(prompt[8].1, .object([("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(prompt[9].1, .array([.object([("choice", "allow"), ("label", "Allow")]),
                                            .object([("choice", "deny"), ("label", "Wi-Fi only")]),
                                            .object([("choice", "once"), ("label", "Allow once")])]))
        XCTAssertEqual(prompt[10].1, "until netpermd restarts or its policy changes")
        let named = try members(line(&s, .prompt(blocked)))
        XCTAssertEqual(named[5].1, .null, "a prompt without an asker's identity")
        XCTAssertEqual(named[4].1, .null, "nor a socket's uid")
        let answered = try members(line(&s, .promptAnswered(p, .deny, once: false, uid: nil)))
        XCTAssertEqual(answered.dropFirst(2).map(\.1), [7, "me", 1000, "wwan", .array(["wwan", "metered"]), "deny", false, .null] as [JSON])
    }
}
