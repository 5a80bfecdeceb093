import NetpermCore
import XCTest

/// Link events from comparing two pictures of the network.
final class LinkEventTests: XCTestCase {
    func testAddedChangedRemoved() {
        let eth = makeLink(2, "eth0", .ethernet, metric: 100)
        let wlan = makeLink(3, "wlan0", .wifi, metric: 600)
        let lo = makeLink(1, "lo", .loopback, metric: nil)
        let old = NetworkState(links: [lo, eth, wlan])
        let eth2 = makeLink(2, "eth0", .ethernet, metric: nil)
        let wwan = makeLink(4, "wwan0", .wwan, metric: 700)
        let new = NetworkState(links: [lo, wwan, eth2])
        XCTAssertEqual(Event.linkChanges(from: old, to: new),
                       [.link(.changed, eth2), .link(.added, wwan), .link(.removed, wlan)])
    }

    func testNoEventWhenUnchanged() {
        let s = NetworkState(links: [makeLink(1, "lo", .loopback, metric: nil), makeLink(2, "eth0", .ethernet)])
        XCTAssertEqual(Event.linkChanges(from: s, to: s), [])
        XCTAssertEqual(Event.linkChanges(from: NetworkState(), to: NetworkState()), [])
        // Same content, built separately.
        XCTAssertEqual(Event.linkChanges(from: s, to: NetworkState(links: [makeLink(2, "eth0", .ethernet),
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
            XCTAssertEqual(Event.linkChanges(from: NetworkState(links: [base]), to: NetworkState(links: [v])),
                           [.link(.changed, v)])
        }
    }

    func testFromAndToNothing() {
        let links = [makeLink(2, "eth0", .ethernet), makeLink(3, "wlan0", .wifi)]
        XCTAssertEqual(Event.linkChanges(from: NetworkState(), to: NetworkState(links: links)),
                       links.map { .link(.added, $0) })
        XCTAssertEqual(Event.linkChanges(from: NetworkState(links: links), to: NetworkState()),
                       links.map { .link(.removed, $0) })
    }

    func testEventTopicsAndNames() {
        let l = makeLink(2, "eth0", .ethernet)
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: NetworkState(), ready: true)
        XCTAssertEqual(Event.link(.added, l).topic, .links)
        XCTAssertEqual(Event.app(v).topic, .apps)
        XCTAssertEqual(Event.policy(generation: 1, apps: 0, error: nil).topic, .policy)
        XCTAssertEqual(Event.link(.added, l).name, "link")
        XCTAssertEqual(Event.app(v).name, "app")
        XCTAssertEqual(Event.policy(generation: 1, apps: 0, error: nil).name, "policy")
    }
}

/// Per-app verdicts and the events when they change.
final class VerdictTrackerTests: XCTestCase {
    /// a and c share a permission set; b differs only on WWAN; d is defaults (WWAN=ask); e is Ethernet-only.
    private func config() throws -> Config {
        try parsePolicy("""
        [App a]
        User=1
        WWAN=allow
        [App b]
        User=2
        WWAN=deny
        [App c]
        User=3
        WWAN=allow
        [App d]
        User=4
        [App e]
        User=5
        WiFi=deny
        WWAN=deny
        Other=deny
        """)
    }

    /// With an agent listening, so that `ask` prompts (no agent: see testLastAgentLeaving...).
    private func state(_ links: [Link], ready: Bool = true, config: Config? = nil) throws -> DaemonState {
        var s = DaemonState(ready: ready, network: NetworkState(links: links), config: try config ?? self.config(),
                            policyGeneration: 1)
        s.agents = 1
        return s
    }

    private let eth = makeLink(2, "eth0", .ethernet, metric: 100)
    private let wwan = makeLink(4, "wwan0", .wwan, metric: 700)

    /// Verdicts the events carry, by app (the order across permission sets is not part of the contract).
    private func byApp(_ events: [Event], file: StaticString = #filePath, line: UInt = #line) -> [String: Verdict] {
        var out: [String: Verdict] = [:]
        for e in events {
            guard case let .app(v) = e else { XCTFail("not an app event: \(e)", file: file, line: line); continue }
            XCTAssertNil(out[v.app], "two events for \(v.app)", file: file, line: line)
            out[v.app] = v
        }
        return out
    }

    func testResetFromNothingHasNoEventsAndTracksEveryApp() throws {
        var t = VerdictTracker()
        let s = try state([eth])
        XCTAssertEqual(t.reset(state: s, extra: []), [])
        XCTAssertEqual(t.all.map(\.app), ["a", "b", "c", "d", "e"])
        XCTAssertTrue(t.all.allSatisfy { $0.matchedBy == .name })
        XCTAssertTrue(t.all.allSatisfy { $0.available && $0.via?.name == "eth0" })
        XCTAssertEqual(t.verdict("d")?.permissions.wwan, .ask)
        XCTAssertNil(t.verdict("zzz"))
        // Each verdict is what the state computes directly.
        for app in s.config.apps {
            XCTAssertEqual(t.verdict(app.id), s.verdict(for: AppMatch(id: app.id, matchedBy: .name, app: app)))
        }
    }

    func testRefreshWithoutChangeIsQuiet() throws {
        var t = VerdictTracker()
        let s = try state([eth, wwan])
        _ = t.reset(state: s, extra: [])
        XCTAssertEqual(t.refresh(state: s), [])
        XCTAssertEqual(t.refresh(state: s), [])
    }

    /// Ethernet goes away, cellular stays: every app's verdict changes, and each app gets its own event, including
    /// the two that share a permission set.
    func testRefreshEventsForEveryChangedApp() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        let events = byApp(t.refresh(state: try state([wwan])))
        XCTAssertEqual(Set(events.keys), ["a", "b", "c", "d", "e"])
        XCTAssertEqual(events["a"]?.via?.name, "wwan0")
        XCTAssertEqual(events["c"]?.via?.name, "wwan0")
        XCTAssertEqual(events["a"]?.matchedBy, .name)
        XCTAssertEqual(events["b"]?.reason, .denied)
        XCTAssertEqual(events["b"]?.deniedKinds, [.wwan])
        XCTAssertEqual(events["d"]?.reason, .awaitingDecision)
        XCTAssertEqual(events["d"]?.pendingKinds, [.wwan])
        XCTAssertEqual(events["e"]?.reason, .denied)
        // The tracker now answers with the new verdicts.
        XCTAssertEqual(t.verdict("c")?.via?.name, "wwan0")
        XCTAssertEqual(t.verdict("d")?.reason, .awaitingDecision)
        XCTAssertEqual(t.refresh(state: try state([wwan])), [])
    }

    /// Cellular gets a better metric: apps allowed on it switch to it; apps that stay on Ethernet (with cellular
    /// still denied) are not told anything.
    func testRefreshOnlyForAffectedApps() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        let better = makeLink(4, "wwan0", .wwan, metric: 50)
        let events = byApp(t.refresh(state: try state([eth, better])))
        XCTAssertEqual(Set(events.keys), ["a", "c"])
        XCTAssertEqual(events["a"]?.via?.name, "wwan0")
        XCTAssertEqual(t.verdict("b")?.via?.name, "eth0")
    }

    /// A metric change that does not move anyone's `via`, and an unusable link appearing: no app event.
    func testIrrelevantNetworkChangesAreQuiet() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        XCTAssertEqual(t.refresh(state: try state([makeLink(2, "eth0", .ethernet, metric: 90), wwan])), [])
        XCTAssertEqual(t.refresh(state: try state([makeLink(2, "eth0", .ethernet, metric: 90), wwan,
                                                   makeLink(7, "wlan0", .wifi, metric: nil),
                                                   makeLink(8, "usb0", .other, metric: 1, carrier: false)])), [])
    }

    /// A Wi-Fi link with a worse metric appears: apps allowed on it keep their via and hear nothing; the app that
    /// denies Wi-Fi hears that its denied_kinds changed.
    func testDeniedKindsChangeIsAnEvent() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth]), extra: [])
        let events = byApp(t.refresh(state: try state([eth, makeLink(7, "wlan0", .wifi, metric: 600)])))
        XCTAssertEqual(Set(events.keys), ["e"], "only e's verdict changed (denied_kinds gains wifi)")
        XCTAssertEqual(events["e"]?.deniedKinds, [.wifi])
        XCTAssertEqual(events["e"]?.via?.name, "eth0")
    }

    func testBecomingReadyIsAnEventForEveryApp() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth], ready: false), extra: [])
        XCTAssertTrue(t.all.allSatisfy { $0.reason == .starting })
        let events = byApp(t.refresh(state: try state([eth], ready: true)))
        XCTAssertEqual(Set(events.keys), ["a", "b", "c", "d", "e"])
        XCTAssertTrue(events.values.allSatisfy { $0.reason == .ok })
    }

    func testTrackAddsWithoutEventAndThenRefreshes() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        let curl = AppMatch(id: "curl", matchedBy: .defaults, app: nil)
        t.track(curl, state: try state([eth, wwan]))
        XCTAssertEqual(t.all.map(\.app), ["a", "b", "c", "d", "e", "curl"])
        XCTAssertEqual(t.verdict("curl")?.matchedBy, .defaults)
        XCTAssertEqual(t.verdict("curl")?.via?.name, "eth0")
        // Tracking again (or tracking a policy app) changes nothing.
        t.track(AppMatch(id: "curl", matchedBy: .executable, app: nil), state: try state([eth, wwan]))
        t.track(AppMatch(id: "a", matchedBy: .user, app: nil), state: try state([eth, wwan]))
        XCTAssertEqual(t.verdict("curl")?.matchedBy, .defaults)
        XCTAssertEqual(t.verdict("a")?.matchedBy, .name)
        XCTAssertEqual(t.all.count, 6)

        // curl shares d's set (defaults): both hear that Ethernet went.
        let events = byApp(t.refresh(state: try state([wwan])))
        XCTAssertEqual(events["curl"]?.reason, .awaitingDecision)
        XCTAssertEqual(events["curl"]?.matchedBy, .defaults)
        XCTAssertEqual(events["d"]?.reason, .awaitingDecision)
    }

    /// The last agent leaving turns every undecided `ask` into a `no-agent` deny, and the first one coming back
    /// turns it back: app events for exactly the apps with an undecided `ask` (d), none for the others.
    func testLastAgentLeavingAndFirstComingBackChangeOnlyUndecidedAsk() throws {
        var t = VerdictTracker()
        var s = try state([wwan])
        _ = t.reset(state: s, extra: [])
        XCTAssertEqual(t.verdict("d")?.reason, .awaitingDecision)

        s.agents = 0
        let gone = byApp(t.reset(state: s, extra: []))
        XCTAssertEqual(Set(gone.keys), ["d"])
        XCTAssertEqual(gone["d"]?.reason, .denied)
        XCTAssertEqual(gone["d"]?.deniedKinds, [.wwan])
        XCTAssertEqual(gone["d"]?.sources[.wwan], .noAgent)
        XCTAssertEqual(gone["d"]?.unaskedKinds, [.wwan])
        XCTAssertEqual(t.verdict("b")?.unaskedKinds, [], "b's deny is the policy's")

        s.agents = 2
        let back = byApp(t.reset(state: s, extra: []))
        XCTAssertEqual(Set(back.keys), ["d"])
        XCTAssertEqual(back["d"]?.reason, .awaitingDecision)
        XCTAssertEqual(back["d"]?.pendingKinds, [.wwan])
        XCTAssertNil(back["d"]?.sources[.wwan])
    }

    /// After a reload: events only for apps whose verdict (or permissions) changed; extra apps are kept.
    func testResetEventsOnlyForChangedApps() throws {
        var t = VerdictTracker()
        let links = [eth, wwan]
        _ = t.reset(state: try state(links), extra: [])
        let curl = AppMatch(id: "curl", matchedBy: .defaults, app: nil)
        t.track(curl, state: try state(links))

        // b now denies Ethernet; a gains a WiFi=ask that changes nothing visible but its permissions; a new app f.
        let changed = try parsePolicy("""
        [Defaults]
        WWAN=ask
        [App a]
        User=1
        WWAN=allow
        WiFi=ask
        [App b]
        User=2
        WWAN=deny
        Ethernet=deny
        [App c]
        User=3
        WWAN=allow
        [App d]
        User=4
        [App e]
        User=5
        WiFi=deny
        WWAN=deny
        Other=deny
        [App f]
        User=6
        """)
        let events = byApp(t.reset(state: try state(links, config: changed), extra: [curl]))
        XCTAssertEqual(Set(events.keys), ["a", "b"])
        XCTAssertEqual(events["a"]?.permissions.wifi, .ask)
        XCTAssertEqual(events["b"]?.reason, .denied)
        XCTAssertEqual(events["b"]?.deniedKinds, [.wwan, .ethernet])
        XCTAssertEqual(t.all.map(\.app), ["a", "b", "c", "d", "e", "f", "curl"])
        XCTAssertEqual(t.verdict("curl")?.matchedBy, .defaults)

        // Without it in `extra`, a derived app is dropped.
        _ = t.reset(state: try state(links, config: changed), extra: [])
        XCTAssertNil(t.verdict("curl"))
    }

    /// A policy app's id wins over an extra with the same id.
    func testExtraDoesNotReplaceAPolicyApp() throws {
        var t = VerdictTracker()
        let s = try state([eth, wwan])
        _ = t.reset(state: s, extra: [AppMatch(id: "b", matchedBy: .defaults, app: nil)])
        XCTAssertEqual(t.verdict("b")?.matchedBy, .name)
        XCTAssertEqual(t.verdict("b")?.permissions.wwan, .deny)
        XCTAssertEqual(t.all.count, 5)
    }

    func testRenamed() {
        let v = Verdict.compute(app: "", matchedBy: .name, permissions: .builtIn,
                                network: NetworkState(links: [eth]), ready: true)
        let r = v.renamed("x", .unit)
        XCTAssertEqual(r.app, "x")
        XCTAssertEqual(r.matchedBy, .unit)
        XCTAssertEqual(r.via, v.via)
        XCTAssertEqual(r.permissions, v.permissions)
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
        XCTAssertEqual(e.message, "unknown topic 'bogus' (expected links, apps, policy, prompts)")
    }

    private func verdict(_ app: String, ready: Bool = true) -> Verdict {
        Verdict.compute(app: app, matchedBy: .executable, permissions: .builtIn,
                        network: NetworkState(links: [makeLink(2, "eth0", .ethernet)]), ready: ready)
    }

    func testUnprivilegedSeesOnlyItsOwnApp() {
        let s = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me")
        XCTAssertTrue(s.wants(.app(verdict("me"))))
        XCTAssertFalse(s.wants(.app(verdict("other"))))
        XCTAssertFalse(s.wants(.app(verdict("me2"))))
        XCTAssertTrue(s.wants(.link(.added, makeLink(2, "eth0", .ethernet))))
        XCTAssertTrue(s.wants(.policy(generation: 2, apps: 1, error: nil)))
    }

    func testPrivilegedSeesEveryApp() {
        let s = Subscription(topics: Set(Topic.allCases), privileged: true, appID: "me")
        XCTAssertTrue(s.wants(.app(verdict("me"))))
        XCTAssertTrue(s.wants(.app(verdict("other"))))
    }

    func testTopicsFilter() {
        let linksOnly = Subscription(topics: [.links], privileged: true, appID: "me")
        XCTAssertTrue(linksOnly.wants(.link(.removed, makeLink(2, "eth0", .ethernet))))
        XCTAssertFalse(linksOnly.wants(.app(verdict("me"))))
        XCTAssertFalse(linksOnly.wants(.policy(generation: 2, apps: 1, error: nil)))
        let apps = Subscription(topics: [.apps, .policy], privileged: false, appID: "me")
        XCTAssertFalse(apps.wants(.link(.removed, makeLink(2, "eth0", .ethernet))))
        XCTAssertTrue(apps.wants(.app(verdict("me"))))
        XCTAssertTrue(apps.wants(.policy(generation: 2, apps: 1, error: "x")))
    }

    private func parse(_ line: String, file: StaticString = #filePath, line l: UInt = #line) throws
        -> [(String, JSON)] {
        XCTAssertTrue(line.hasSuffix("\n"), file: file, line: l)
        XCTAssertEqual(line.filter { $0 == "\n" }.count, 1, "exactly one line", file: file, line: l)
        guard case let .object(members) = try JSONParser.parse(line) else {
            XCTFail("not an object: \(line)", file: file, line: l)
            return []
        }
        return members
    }

    func testSeqCountsEveryLineStartingWithTheSnapshot() throws {
        var s = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me")
        XCTAssertEqual(s.seq, 0)
        let state = DaemonState(ready: true, network: NetworkState(links: [makeLink(2, "eth0", .ethernet)]),
                                policyGeneration: 3)
        let snap = try parse(s.snapshot(state: state, verdicts: [verdict("me"), verdict("other")]))
        XCTAssertEqual(snap.first?.0, "event")
        XCTAssertEqual(snap.first?.1, "snapshot")
        XCTAssertEqual(snap.dropFirst().first?.0, "seq")
        XCTAssertEqual(snap.dropFirst().first?.1, 1)
        XCTAssertEqual(s.seq, 1)
        let event = Event.policy(generation: 4, apps: 0, error: nil)
        for expected in 2...5 {
            let members = try parse(s.line(event: event.name, tail: event.encodedTail()))
            XCTAssertEqual(members[1].0, "seq")
            XCTAssertEqual(members[1].1, .int(expected))
        }
        XCTAssertEqual(s.seq, 5)
        // Each subscriber counts on its own.
        var other = Subscription(topics: [.policy], privileged: true, appID: "x")
        XCTAssertEqual(try parse(other.line(event: event.name, tail: event.encodedTail()))[1].1, 1)
    }

    func testSnapshotContents() throws {
        let state = DaemonState(ready: true, network: NetworkState(links: [makeLink(2, "eth0", .ethernet)]),
                                config: try parsePolicy("[App me]\nUser=1\n[App other]\nUser=2\n"),
                                policyGeneration: 3, policyError: "bad line")
        let verdicts = [verdict("me"), verdict("other")]

        var unpriv = Subscription(topics: Set(Topic.allCases), privileged: false, appID: "me")
        let u = try JSONParser.parse(unpriv.snapshot(state: state, verdicts: verdicts))
        XCTAssertEqual(u["links"]?.arrayValue?.map { $0["name"] }, ["eth0"])
        XCTAssertEqual(u["apps"]?.arrayValue?.map { $0["app"] }, ["me"])
        XCTAssertNil(u["apps"]?.arrayValue?.first?["matched_by"], "events do not carry matched_by")
        XCTAssertEqual(u["apps"]?.arrayValue?.first?["available"], true)
        XCTAssertEqual(u["policy"], .object([("generation", 3), ("apps", 2), ("error", "bad line")]))

        var priv = Subscription(topics: [.apps], privileged: true, appID: "me")
        let p = try JSONParser.parse(priv.snapshot(state: state, verdicts: verdicts))
        XCTAssertEqual(p["apps"]?.arrayValue?.map { $0["app"] }, ["me", "other"])
        XCTAssertNil(p["links"])
        XCTAssertNil(p["policy"])
    }

    /// Every kind of event: `{"event":NAME,"seq":N,` then exactly the event's fields, valid JSON, one line.
    func testLineIsJSONWithEventAndSeqFirst() throws {
        let link = makeLink(4, "wwan0", .wwan, metric: 700)
        let v = verdict("me")
        let events: [Event] = [
            .link(.added, link), .link(.changed, link), .link(.removed, link), .app(v), .app(verdict("me", ready: false)),
            .policy(generation: 7, apps: 12, error: nil),
            .policy(generation: 7, apps: 12, error: "/etc/netpermd/netpermd.conf:3: bad \"quoted\"\nvalue"),
        ]
        var s = Subscription(topics: Set(Topic.allCases), privileged: true, appID: "me")
        for (i, e) in events.enumerated() {
            let members = try parse(s.line(event: e.name, tail: e.encodedTail()))
            XCTAssertEqual(members.map(\.0), ["event", "seq"] + e.fields.map(\.0), "\(e)")
            XCTAssertEqual(members[0].1, .string(e.name))
            XCTAssertEqual(members[1].1, .int(i + 1))
            XCTAssertEqual(Array(members.dropFirst(2)).map(\.1), e.fields.map(\.1), "\(e)")
        }
        // Spot checks on the fields themselves.
        let linkFields = try parse(s.line(event: "link", tail: Event.link(.changed, link).encodedTail()))
        XCTAssertEqual(linkFields[2].1, "changed")
        XCTAssertEqual(linkFields[3].1["name"], "wwan0")
        XCTAssertEqual(linkFields[3].1["metered"], true)
        let appFields = try parse(s.line(event: "app", tail: Event.app(v).encodedTail()))
        XCTAssertEqual(appFields.map(\.0), ["event", "seq", "app", "available", "reason", "via", "denied_kinds",
                                            "pending_kinds", "permissions", "sources"])
        let policy = try parse(s.line(event: "policy", tail: Event.policy(generation: 7, apps: 1, error: nil)
            .encodedTail()))
        XCTAssertEqual(policy.map(\.0), ["event", "seq", "generation", "apps", "error"])
        XCTAssertEqual(policy[4].1, .null)
    }
}
