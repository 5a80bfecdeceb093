// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermProtocol
import XCTest

/// SUBSCRIBE: the acknowledgement, the snapshot, and the events that follow, each subscriber with its own topics,
/// filter and sequence numbers.
final class EngineSubscribeTests: XCTestCase {
    private let policy = Policies.abcde

    private let eth = Links.eth
    private let wwan = Links.wwan

    private func harness(_ links: [Link]? = nil, agents: Bool = true) -> EngineHarness {
        EngineHarness(policy: policy, links: links ?? [eth, wwan], agents: agents)
    }

    private func apps(_ events: [JSON]) -> [String] { events.compactMap { $0["app"]?.stringValue } }

    // MARK: The acknowledgement and the snapshot

    /// No topic means links, apps and policy; an unprivileged subscriber's snapshot has its own app only, without
    /// matched_by (events describe the app, not how one asker was recognised).
    func testDefaultSubscription() throws {
        let h = harness()
        let c = h.connect(makePeer(uid: 1, exe: "/usr/bin/a"))
        let (ack, snapshot) = h.subscribe(c)
        XCTAssertEqual(ack.encoded(), #"{"ok":true,"subscribed":["links","apps","policy"],"app":"a","privileged":false}"#)
        XCTAssertEqual(snapshot.keys, ["event", "seq", "links", "apps", "policy"])
        XCTAssertEqual(snapshot["event"], "snapshot")
        XCTAssertEqual(snapshot["seq"], 1)
        XCTAssertEqual(snapshot["links"], h.request(h.connect(), "LINKS")["links"])
        let apps = try XCTUnwrap(snapshot["apps"]?.arrayValue)
        XCTAssertEqual(apps.map { $0["app"] }, ["a"])
        XCTAssertEqual(apps.first?.keys, ["app", "available", "reason", "via", "egress", "bind_to", "denied_kinds",
                                         "pending_kinds", "permissions", "sources", "enforced", "enforced_why", "message"])
        XCTAssertEqual(apps.first?["via"]?["name"], "eth0")
        XCTAssertEqual(snapshot["policy"], .object([("generation", 1), ("apps", 5), ("error", .null)]))
    }

    /// Only the topics asked for, in the protocol's order whatever the request's, in any case, duplicates once.
    func testTopics() {
        let h = harness()
        let rows: [(String, [JSON], [String])] = [
            ("policy LINKS", ["links", "policy"], ["event", "seq", "links", "policy"]),
            ("apps apps", ["apps"], ["event", "seq", "apps"]),
            ("Policy", ["policy"], ["event", "seq", "policy"]),
            ("prompts apps", ["apps", "prompts"], ["event", "seq", "apps", "prompts"]),
            ("prompts", ["prompts"], ["event", "seq", "prompts"]),
            ("links apps policy prompts", ["links", "apps", "policy", "prompts"],
             ["event", "seq", "links", "apps", "prompts", "policy"]),
        ]
        for (topics, subscribed, keys) in rows {
            let (ack, snapshot) = h.subscribe(h.connect(Peers.admin), topics)
            XCTAssertEqual(ack["subscribed"], .array(subscribed), topics)
            XCTAssertEqual(ack["privileged"], true, topics)
            XCTAssertEqual(ack["app"], "netpermctl", topics)
            XCTAssertEqual(snapshot.keys, keys, topics)
        }
    }

    /// A privileged subscriber's snapshot has every app tracked: the policy's in order, then apps outside it that
    /// someone waits for or listens to, in the order their connections came (the harness's agent, netpermctl, is
    /// first; the admin's own app is the same).
    func testPrivilegedSnapshotHasEveryApp() {
        let h = harness([wwan])
        let maps = h.connect(Peers.maps)
        _ = h.send(maps, "WAIT")
        XCTAssertTrue(h.connections[maps]!.held)
        let (_, snapshot) = h.subscribe(h.connect(Peers.admin), "apps")
        XCTAssertEqual(apps(snapshot["apps"]?.arrayValue ?? []), ["a", "b", "c", "d", "e", "netpermctl", "maps"])
    }

    /// The first agent turns verdicts around before its snapshot is written: its own app must still be in it,
    /// as it is in any other privileged subscriber's.
    func testFirstAgentsSnapshotHasItsOwnApp() {
        let h = harness(agents: false)
        let (_, plain) = h.subscribe(h.connect(Peers.admin), "apps")
        XCTAssertTrue(apps(plain["apps"]?.arrayValue ?? []).contains("netpermctl"))
        let (_, agent) = h.subscribe(h.connect(makePeer(uid: 1001, gids: [990], exe: "/usr/bin/agent", pid: 78)),
                                     "apps prompts")
        XCTAssertEqual(apps(agent["apps"]?.arrayValue ?? []), ["a", "b", "c", "d", "e", "netpermctl", "agent"])
    }

    /// `self` is the subscriber's own app whatever its privilege: a privileged subscriber's snapshot and events
    /// name no other app, an unprivileged one's are those of `apps`.
    func testSelfIsTheOwnAppOnlyEvenWhenPrivileged() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        let (ack, snapshot) = h.subscribe(admin, "self")
        XCTAssertEqual(ack["subscribed"], .array(["self"]))
        XCTAssertEqual(ack["privileged"], true)
        XCTAssertEqual(snapshot.keys, ["event", "seq", "apps"])
        XCTAssertEqual(apps(snapshot["apps"]?.arrayValue ?? []), ["netpermctl"])
        let a = h.connect(makePeer(uid: 1, exe: "/usr/bin/a"))
        let (_, own) = h.subscribe(a, "self")
        XCTAssertEqual(apps(own["apps"]?.arrayValue ?? []), ["a"])
        // Every app loses its link: each subscriber hears of its own app alone, and no link event.
        h.setLinks([])
        XCTAssertEqual(apps(h.takeEvents(admin)), ["netpermctl"])
        let events = h.takeEvents(a)
        XCTAssertEqual(events.map { $0["event"] }, ["app"])
        XCTAssertEqual(apps(events), ["a"])
        // A change of another app alone sends nothing, privileged or not.
        h.setLinks([eth, wwan])
        _ = h.takeEvents(admin)
        _ = h.takeEvents(a)
        XCTAssertEqual(h.request(h.connect(), "DECIDE d wwan allow")["ok"], true)
        XCTAssertEqual(h.take(admin), [])
        XCTAssertEqual(h.take(a), [])
        // With apps too, the privileged subscriber hears every app again.
        let (_, both) = h.subscribe(admin, "apps self")
        XCTAssertEqual(apps(both["apps"]?.arrayValue ?? []), ["a", "b", "c", "d", "e", "netpermctl"])
    }

    /// After a failed reload the snapshot's policy has the error, with the generation still in force.
    func testSnapshotPolicyAfterAFailedReload() {
        let h = harness()
        h.reload(policy: "[App x]\nWWAN=allow\n")
        let (_, snapshot) = h.subscribe(h.connect(Peers.curl), "policy")
        XCTAssertEqual(snapshot["policy"]?["generation"], 1)
        XCTAssertEqual(snapshot["policy"]?["apps"], 5)
        XCTAssertEqual(snapshot["policy"]?["error"],
                       "/etc/netpermd/netpermd.conf:1: [App x]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
    }

    func testBadTopic() {
        let h = harness()
        let c = h.connect(Peers.curl)
        XCTAssertEqual(h.requestError(c, "SUBSCRIBE links bogus", .badArguments),
                       "unknown topic 'bogus' (expected links, apps, policy, prompts, self, usage, mine, scopes)")
        XCTAssertFalse(h.connections[c]!.keepsOpen)
        h.setLinks([eth])
        XCTAssertEqual(h.take(c), [], "not subscribed")
    }

    /// With `[Defaults] UserDecisions=no`, prompts are for privileged agents only, and an unprivileged attempt
    /// subscribes to nothing.
    func testPromptsNeedsPrivilegeWithoutUserDecisions() {
        let h = EngineHarness(policy: policy + "\n[Defaults]\nUserDecisions=no\n", links: [eth])
        let c = h.connect(Peers.curl)
        for line in ["SUBSCRIBE prompts", "SUBSCRIBE apps PROMPTS"] {
            XCTAssertEqual(h.requestError(c, line, .permissionDenied),
                           "only root or members of group 'netperm' may subscribe to prompts ([Defaults] "
                           + "UserDecisions=no: users do not answer for their own apps)")
        }
        XCTAssertFalse(h.connections[c]!.keepsOpen)
        XCTAssertEqual(h.request(c, "STATUS")["agents"], 0)
    }

    /// With user decisions (the default), an unprivileged subscriber of prompts is its own uid's agent: counted
    /// apart (`user_agents`), it makes its uid's undecided `ask` a question, not everyone's.
    func testAUsersAgentIsItsOwnUidsAgent() {
        let h = EngineHarness(policy: policy, links: [wwan])
        let agent = h.connect(makePeer(uid: 4, exe: "/usr/bin/netpermctl", pid: 44))
        let (ack, snapshot) = h.subscribe(agent, "prompts")
        XCTAssertEqual(ack["privileged"], false)
        XCTAssertEqual(snapshot["prompts"], .array([]))
        let status = h.request(h.connect(), "STATUS")
        XCTAssertEqual(status["agents"], 0)
        XCTAssertEqual(status["user_agents"], 1)
        // Issue 36, 12: another user is not told that uid 4 runs a desktop session; uid 4 is told of its own.
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 5, exe: "/usr/bin/x", pid: 46)), "STATUS")["user_agents"], 0)
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 4, exe: "/usr/bin/x", pid: 47)), "STATUS")["user_agents"], 1)
        XCTAssertEqual(h.request(h.connect(makePeer(uid: 4, exe: "/usr/bin/x", pid: 45)), "QUERY")["reason"],
                       "awaiting-decision", "uid 4's own agent can be asked")
        XCTAssertEqual(h.takeEvents(agent, named: "prompt").map { $0["app"] }, ["d"])
        XCTAssertEqual(h.request(h.connect(), "QUERY d")["sources"]?["wwan"], "no-agent", "nobody asks for everyone")
        h.disconnect(agent)
        XCTAssertEqual(h.request(h.connect(), "STATUS")["user_agents"], 0)
    }

    /// Issue 36, 12: a reload turning UserDecisions= off left users' agents subscribed and useless. Each is told
    /// in an event of its own, and its prompts topic is taken off (its others stay).
    func testAUsersAgentIsToldWhenUsersNoLongerDecide() {
        let h = EngineHarness(policy: policy, links: [wwan])
        let agent = h.connect(makePeer(uid: 4, exe: "/usr/bin/netpermctl", pid: 44))
        _ = h.subscribe(agent, "prompts apps")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["user_agents"], 1)
        h.reload(policy: policy + "\n[Defaults]\nUserDecisions=no\n")
        let told = h.takeEvents(agent, named: "unsubscribed")
        XCTAssertEqual(told.count, 1)
        XCTAssertEqual(told.first?["topics"], .array([.string("prompts")]))
        XCTAssertEqual(told.first?["error"], "permission-denied")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["user_agents"], 0)
        h.reload(policy: policy + "\n[Defaults]\nUserDecisions=no\nWiFi=deny\n")
        XCTAssertTrue(h.takeEvents(agent, named: "unsubscribed").isEmpty, "told once")
    }

    /// Issue 36, 1: a reload that makes a subscriber of `self` another app (its [App] renamed, or one added for a
    /// process under [Defaults]) told it nothing, and the GLib module kept the old app's verdict for good. It hears
    /// its new app's verdict once the reload has settled.
    func testAReloadThatMakesAProcessAnotherAppTellsIt() {
        let policy = "[Interface wwan0]\nKind=wwan\n[App gapp]\nExecutable=/usr/bin/gapp\nWWAN=deny\n"
        let h = EngineHarness(policy: policy, links: [wwan])
        let app = h.connect(makePeer(uid: 1000, exe: "/usr/bin/gapp", pid: 70))
        _ = h.subscribe(app, "self")
        h.reload(policy: policy.replacingOccurrences(of: "[App gapp]", with: "[App gapp2]")
            .replacingOccurrences(of: "WWAN=deny", with: "WWAN=allow"))
        let events = h.takeEvents(app, named: "app")
        XCTAssertEqual(events.map { $0["app"] }, ["gapp2"], "\(events)")
        XCTAssertEqual(events.last?["available"], true)
        h.reload(policy: "[Interface wwan0]\nKind=wwan\n[App gapp2]\nExecutable=/usr/bin/gapp\nWWAN=allow\n"
            + "[App other]\nExecutable=/usr/bin/other\n")
        XCTAssertTrue(h.takeEvents(app, named: "app").isEmpty, "the same app: nothing more to tell")
    }

    /// Keep-open comes before any reply: a client whose input has already ended is not closed once the reply
    /// is sent.
    func testKeepOpenAfterInputEndsComesFirst() {
        let h = harness()
        let c = h.connect(Peers.curl)
        let mark = h.steps.count
        _ = h.subscribe(c, "links")
        XCTAssertEqual(h.steps[mark...].filter { $0.hasSuffix(" \(c)") }, ["keep-open \(c)", "reply \(c)", "reply \(c)"])
        XCTAssertTrue(h.connections[c]!.keepsOpen)
    }

    /// A subscriber still sends requests; their replies come in order with the events.
    func testRequestsWhileSubscribed() {
        let h = harness()
        let c = h.connect(Peers.admin)
        _ = h.subscribe(c)
        XCTAssertEqual(h.request(c, "PING")["pong"], true)
        let got = h.send(c, "DECIDE d wwan allow").map(EngineHarness.parse)
        XCTAssertEqual(got.map { $0["event"]?.stringValue ?? "reply" }, ["app", "reply"], "the event, then the reply")
    }

    // MARK: Events

    /// Each subscriber counts its own events from the snapshot's 1, whatever their kind, without a gap (the
    /// harness checks every line; here the numbers are spelt out).
    func testSeqCountsEveryEventOfTheConnection() {
        let h = harness()
        let all = h.connect(Peers.admin)
        let links = h.connect(Peers.admin)
        _ = h.subscribe(all)
        _ = h.subscribe(links, "links")
        h.setLinks([wwan])
        h.reload(policy: policy + "\n[App f]\nUser=6\n")
        h.feed(.stopping)
        let seqAll = h.takeParsed(all).compactMap { $0["seq"]?.intValue }
        XCTAssertEqual(seqAll, Array(2..<(2 + seqAll.count)))
        XCTAssertGreaterThan(seqAll.count, 5)
        XCTAssertEqual(h.takeParsed(links).map { $0["seq"] }, [2, 3], "the link removed, then stopping")
    }

    func testLinkEvents() {
        let h = harness([])
        let c = h.connect(Peers.curl)
        _ = h.subscribe(c, "links")
        h.setLinks([eth, wwan])
        var down = eth
        down.status.carrier = false
        down.status.operstate = "down"
        h.setLinks([down, wwan])
        h.setLinks([down])
        let events = h.takeEvents(c)
        XCTAssertEqual(events.map { $0["event"] }, ["link", "link", "link", "link"])
        XCTAssertEqual(events.map { $0["change"] }, ["added", "added", "changed", "removed"])
        XCTAssertEqual(events.map { $0["link"]?["name"] }, ["eth0", "wwan0", "eth0", "wwan0"])
        XCTAssertEqual(events[0].keys, ["event", "seq", "change", "link"])
        XCTAssertEqual(events[2]["link"]?["usable"], false)
        XCTAssertEqual(events[3]["link"]?["usable"], true, "a removed link as it last was")
        // The same picture again: no event.
        h.setLinks([down])
        XCTAssertEqual(h.take(c), [])
    }

    /// Ethernet goes away, cellular stays: every app's verdict changes, and each app gets its own event, the two
    /// that share a permission set included.
    func testAppEventsForEveryChangedApp() {
        let h = harness()
        let c = h.connect(Peers.admin)
        _ = h.subscribe(c, "apps")
        h.setLinks([wwan])
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(Set(apps(events)), ["a", "b", "c", "d", "e", "netpermctl"])
        XCTAssertEqual(apps(events).count, 6, "one event per app")
        let byApp = Dictionary(events.map { ($0["app"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(byApp["a"]?["via"]?["name"], "wwan0")
        XCTAssertEqual(byApp["c"]?["via"]?["name"], "wwan0")
        XCTAssertEqual(byApp["b"]?["reason"], "denied")
        XCTAssertEqual(byApp["d"]?["reason"], "awaiting-decision")
        XCTAssertEqual(byApp["a"]?.keys, ["event", "seq", "app", "available", "reason", "via", "egress", "bind_to",
                                          "denied_kinds", "pending_kinds", "permissions", "sources", "enforced",
                                          "enforced_why", "message"])
    }

    /// Cellular gets a better metric, so the kernel sends traffic by it: the apps allowed on it switch to it; the
    /// others (netpermctl is [Defaults], WWAN=ask) are routed elsewhere, to bind to Ethernet. Then only what changes
    /// a verdict is told: an unusable link appearing changes none.
    func testAppEventsOnlyForChangedApps() {
        let h = harness()
        let c = h.connect(Peers.admin)
        _ = h.subscribe(c, "apps")
        h.setLinks([eth, makeLink(4, "wwan0", .wwan, metric: 50)])
        let moved = h.takeEvents(c, named: "app")
        XCTAssertEqual(Set(apps(moved)), ["a", "b", "c", "d", "e", "netpermctl"])
        for event in moved {
            let app = event["app"]?.stringValue ?? ""
            if app == "a" || app == "c" {
                XCTAssertEqual(event["via"]?["name"], "wwan0", app)
            } else {
                XCTAssertEqual(event["reason"], "routed-elsewhere", app)
                XCTAssertEqual(event["bind_to"]?["name"], "eth0", app)
            }
        }
        h.setLinks([eth, makeLink(4, "wwan0", .wwan, metric: 50), makeLink(7, "wlan0", .wifi, metric: nil)])
        XCTAssertEqual(h.takeEvents(c, named: "app"), [])
        // A usable Wi-Fi link with a worse metric: only e (which denies Wi-Fi) changes, in denied_kinds.
        h.setLinks([eth, makeLink(4, "wwan0", .wwan, metric: 50), makeLink(7, "wlan0", .wifi, metric: 900)])
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(apps(events), ["e"])
        XCTAssertEqual(events.first?["denied_kinds"], .array(["wifi", "wwan"]))
    }

    /// Only where the kernel sends traffic changes, no link does (a rule, a route in another table): the app
    /// allowed on Wi-Fi only goes from ok to routed-elsewhere, told to bind to wlan0, and back; an app allowed on
    /// both hears that its via moved; no link event.
    func testAppEventsWhenOnlyTheEgressChanges() throws {
        let h = EngineHarness(policy: policy + "\n[App w]\nUser=6\nWWAN=deny\nEthernet=deny\nOther=deny\n",
                              links: [Links.wlan, wwan], agents: true)
        let c = h.connect(Peers.admin)
        _ = h.subscribe(c, "links apps")
        XCTAssertEqual(h.request(c, "QUERY w")["via"]?["name"], "wlan0")

        h.setLinks([Links.wlan, wwan], egress: [.ipv4: .link(4)])
        var events = h.takeEvents(c)
        XCTAssertEqual(h.take(c), [])
        XCTAssertEqual(events.filter { $0["event"] == "link" }, [], "no link changed")
        var byApp = Dictionary(events.map { ($0["app"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        let w = try XCTUnwrap(byApp["w"])
        XCTAssertEqual(w["available"], false)
        XCTAssertEqual(w["reason"], "routed-elsewhere")
        XCTAssertEqual(w["via"], .null)
        XCTAssertEqual(w["bind_to"], .object([("index", 3), ("name", "wlan0"), ("kind", "wifi"), ("metered", false), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(w["egress"], .object([
            ("ipv4", .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null), ("usable", true),
                              ("allowed", false)])),
            ("ipv6", .null),
        ]))
        XCTAssertEqual(byApp["a"]?["via"]?["name"], "wwan0")
        XCTAssertEqual(byApp["a"]?["reason"], "ok")

        h.setLinks([Links.wlan, wwan])
        events = h.takeEvents(c)
        byApp = Dictionary(events.map { ($0["app"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(byApp["w"]?["reason"], "ok")
        XCTAssertEqual(byApp["w"]?["via"], .object([("index", 3), ("name", "wlan0"), ("kind", "wifi"),
                                                    ("metered", false), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(byApp["w"]?["bind_to"], .null)
        XCTAssertEqual(byApp["a"]?["via"]?["name"], "wlan0")

        // The default route moving by its metric (wwan0's becomes the best) does the same, with a link event.
        h.setLinks([Links.wlan, makeLink(4, "wwan0", .wwan, metric: 50)])
        events = h.takeEvents(c)
        XCTAssertEqual(events.filter { $0["event"] == "link" }.map { $0["link"]?["name"] }, ["wwan0"])
        byApp = Dictionary(events.map { ($0["app"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(byApp["w"]?["reason"], "routed-elsewhere")
        XCTAssertEqual(byApp["w"]?["bind_to"]?["name"], "wlan0")
    }

    /// An unprivileged subscriber hears of its own app only; a change to other apps alone sends it nothing.
    func testUnprivilegedHearsOnlyItsOwnApp() {
        let h = harness()
        let c = h.connect(makePeer(uid: 1, exe: "/usr/bin/a"))
        _ = h.subscribe(c, "apps")
        h.setLinks([wwan])
        XCTAssertEqual(apps(h.takeEvents(c)), ["a"])
        XCTAssertEqual(h.request(h.connect(), "DECIDE d wwan allow")["ok"], true)
        XCTAssertEqual(h.take(c), [])
    }

    func testPolicyEvents() {
        let h = harness()
        let c = h.connect(Peers.curl)
        _ = h.subscribe(c, "policy")
        h.reload(policy: policy + "\n[App f]\nUser=6\n")
        h.reload(policy: "[App x]\nWWAN=allow\n")
        let events = h.takeEvents(c)
        XCTAssertEqual(events.map(\.keys), [["event", "seq", "generation", "apps", "error"],
                                            ["event", "seq", "generation", "apps", "error"]])
        XCTAssertEqual(events.first?["generation"], 2)
        XCTAssertEqual(events.first?["apps"], 6)
        XCTAssertEqual(events.first?["error"], .null)
        XCTAssertEqual(events.last?["generation"], 2, "the generation still in force")
        XCTAssertEqual(events.last?["apps"], 6)
        XCTAssertEqual(events.last?["error"],
                       "/etc/netpermd/netpermd.conf:1: [App x]: no Executable=, Unit=, UserUnit=, User= or DesktopId=, so nothing matches it")
    }

    /// `stopping` goes to every subscriber whatever its topics, and to nobody else.
    func testStoppingGoesToEverySubscriber() {
        let h = harness()
        let agent = h.connections.keys.max()!
        let links = h.connect(Peers.curl)
        _ = h.subscribe(links, "links")
        let policyOnly = h.connect(Peers.curl)
        _ = h.subscribe(policyOnly, "policy")
        let plain = h.connect(Peers.curl)
        h.feed(.stopping)
        for c in [agent, links, policyOnly] {
            let events = h.takeEvents(c)
            XCTAssertEqual(events.map(\.keys), [["event", "seq"]])
            XCTAssertEqual(events.first?["event"], "stopping")
        }
        XCTAssertEqual(h.take(plain), [])
    }

    /// A derived app tracked for its subscriber is forgotten when the subscriber leaves.
    func testSubscribersOwnAppIsTrackedWhileItListens() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        _ = h.subscribe(admin, "apps")
        let maps = h.connect(Peers.maps)
        let (_, snapshot) = h.subscribe(maps, "apps")
        XCTAssertEqual(apps(snapshot["apps"]?.arrayValue ?? []), ["maps"])
        h.setLinks([wwan])
        XCTAssertTrue(apps(h.takeEvents(admin)).contains("maps"))
        XCTAssertEqual(apps(h.takeEvents(maps)), ["maps"])
        h.disconnect(maps)
        h.setLinks([eth])
        XCTAssertFalse(apps(h.takeEvents(admin)).contains("maps"))
    }

    /// A privilege lost with a reload narrows what the subscriber hears to its own app.
    func testSubscriptionFollowsTheCallersPrivilege() {
        let h = harness()
        let admin = h.connect(Peers.admin)
        _ = h.subscribe(admin, "apps")
        h.reload(policy: "[Defaults]\nAdminGroup=wheel\n" + policy)
        _ = h.take(admin)
        h.setLinks([wwan])
        XCTAssertEqual(apps(h.takeEvents(admin)), ["netpermctl"])
    }

    // MARK: Subscribing again

    /// Doubtful: SUBSCRIBE on a connection that already subscribed. An agent subscribing again is still one
    /// agent.
    func testAgentSubscribingAgainIsCountedOnce() {
        let h = harness(agents: false)
        let agent = h.connect(Peers.admin)
        _ = h.subscribe(agent, "prompts")
        _ = h.subscribe(agent, "prompts apps")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["agents"], 1)
    }

    /// Doubtful: an agent that subscribes again without `prompts` is no longer an agent, and with no other the
    /// undecided `ask` is a no-agent deny again.
    func testAgentSubscribingAgainWithoutPromptsIsNoLongerAnAgent() {
        let h = harness([wwan], agents: false)
        let agent = h.connect(Peers.admin)
        _ = h.subscribe(agent, "prompts")
        _ = h.subscribe(agent, "links")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["agents"], 0)
        XCTAssertEqual(h.request(h.connect(), "QUERY d")["sources"]?["wwan"], "no-agent")
    }
}
