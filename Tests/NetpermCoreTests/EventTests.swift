import XCTest
// Prompt's memberwise initializer is internal: the engine is the only one that makes prompts.
@testable import NetpermCore

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
        l = base; l.carrier = false; variants.append(l)
        l = base; l.adminUp = false; variants.append(l)
        l = base; l.operstate = "dormant"; variants.append(l)
        l = base; l.addresses = ["192.0.2.1/24"]; variants.append(l)
        l = base; l.defaultRouteV6 = true; variants.append(l)
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
        let p = Prompt(id: 1, app: "a", identity: nil, kind: .wwan, link: "wwan0", metered: true)
        XCTAssertEqual([Event.prompt(p), .promptExpired(p), .promptAnswered(p, .allow, once: false)].map(\.topic),
                       [.prompts, .prompts, .prompts])
        XCTAssertEqual([Event.prompt(p), .promptExpired(p), .promptAnswered(p, .allow, once: false), .stopping].map(\.name.rawValue),
                       ["prompt", "prompt-expired", "prompt-answered", "stopping"])
        XCTAssertNil(Event.stopping.topic, "every subscriber hears it")
    }
}

/// One subscriber's topics, filter and sequence numbers, and the lines it is sent.
final class SubscriptionTests: XCTestCase {
    private func topics(_ args: [String]) -> Set<Topic>? {
        if case let .success(t) = Subscription.topics(from: args) { return t }
        return nil
    }

    func testTopicsParsing() {
        XCTAssertEqual(topics([]), [.links, .apps, .policy], "prompts only when asked for")
        XCTAssertEqual(topics(["prompts"]), [.prompts])
        XCTAssertEqual(topics(["links"]), [.links])
        XCTAssertEqual(topics(["APPS", "Policy"]), [.apps, .policy])
        XCTAssertEqual(topics(["apps", "apps"]), [.apps])
        guard case let .failure(e) = Subscription.topics(from: ["links", "bogus"]) else {
            return XCTFail("expected an error")
        }
        XCTAssertEqual(e.code, .badArguments)
        XCTAssertEqual(e.message, "unknown topic 'bogus' (expected links, apps, policy, prompts, self, usage)")
    }

    private func verdict(_ app: String, ready: Bool = true) -> Verdict {
        Verdict.compute(app: app, matchedBy: .executable, permissions: .builtIn,
                        network: NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)]), ready: ready)
    }

    private let prompt = Prompt(id: 1, app: "me", identity: nil, kind: .wwan, link: "wwan0", metered: true)

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
        XCTAssertFalse(s.wants(.promptAnswered(prompt, .deny, once: true)))
        XCTAssertFalse(s.isAgent)
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
        let p = Prompt(id: 7, app: "me", identity: who, kind: .wwan, link: "wwan0", metered: true)
        let rows: [(Event, [String])] = [
            (.link(.added, link), ["change", "link"]),
            (.link(.changed, link), ["change", "link"]),
            (.link(.removed, link), ["change", "link"]),
            (.app(v), ["app", "available", "reason", "via", "egress", "bind_to", "denied_kinds", "pending_kinds",
                       "permissions", "sources", "enforced", "enforced_why"]),
            (.app(verdict("me", ready: false)), ["app", "available", "reason", "via", "egress", "bind_to",
                                                 "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why"]),
            (.policy(generation: 7, apps: 12, error: nil), ["generation", "apps", "error"]),
            (.policy(generation: 7, apps: 12, error: "/etc/netpermd/netpermd.conf:3: bad \"quoted\"\nvalue"),
             ["generation", "apps", "error"]),
            (.prompt(p), ["id", "app", "identity", "kind", "link"]),
            (.prompt(Prompt(id: 8, app: "x", identity: nil, kind: .wifi, link: "wlan0", metered: false)),
             ["id", "app", "identity", "kind", "link"]),
            (.promptExpired(p), ["id", "app", "kind"]),
            (.promptAnswered(p, .allow, once: true), ["id", "app", "kind", "decision", "once"]),
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
        XCTAssertEqual(prompt[4].1, .object([("executable", "/usr/bin/q\"uote"), ("unit", "a.service"), ("uid", 1000)]))
        XCTAssertEqual(prompt[6].1, .object([("name", "wwan0"), ("metered", true), ("over", .null)]))
        let named = try members(line(&s, .prompt(Prompt(id: 8, app: "x", identity: nil, kind: .wifi, link: "w",
                                                        metered: false))))
        XCTAssertEqual(named[4].1, .null, "a prompt without an asker's identity")
        let answered = try members(line(&s, .promptAnswered(p, .deny, once: false)))
        XCTAssertEqual(answered.dropFirst(2).map(\.1), [7, "me", "wwan", "deny", false] as [JSON])
    }
}
