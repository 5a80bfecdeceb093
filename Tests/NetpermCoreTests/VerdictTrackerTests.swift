// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// Per-app verdicts and the events when they change.
final class VerdictTrackerTests: XCTestCase {
    private func config() throws -> Config { try parsePolicy(Policies.abcde) }

    /// With an agent listening, so that `ask` prompts (no agent: see testLastAgentLeaving...). The kernel routes as
    /// `NetworkState(routedLinks:)` says unless `egress` is given.
    private func state(_ links: [Link], egress: [AddressFamily: Egress]? = nil, ready: Bool = true,
                       config: Config? = nil) throws -> DaemonState {
        let network = egress.map { NetworkState(links: links, egress: $0) } ?? NetworkState(routedLinks: links)
        var s = DaemonState(ready: ready, network: network, config: try config ?? self.config(), policyGeneration: 1)
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

    /// Decisions moving some apps' permissions (for everyone and for one uid's own processes) make only those
    /// apps' verdicts again: the same events, in the same order, and the same verdicts as a reset of every app.
    func testAnUpdateOfTheDecidedAppsIsAReset() throws {
        var s = try state([eth, wwan])
        let extra = s.config.apps.flatMap { app in [1000, 1001].map { (AppMatch(id: app.id, matchedBy: .name, app: app), UInt32?.some($0)) } }
        var steps: [(Decisions) -> Decisions] = []
        for (app, uid) in [("d", nil), ("d", 1000), ("a", nil), ("e", 1001)] as [(String, UInt32?)] {
            for (p, once) in [(Permission.allow, true), (.deny, false), (.allow, false)] {
                steps.append { var d = $0; d.set(app, .wwan, p, once: once, uid: uid); d.set(app, .ethernet, p, once: once, uid: uid); return d }
            }
            steps.append { var d = $0; d.forget(app, kind: nil, uid: uid); return d }
        }
        steps.append { var d = $0; d.dropOnce(); return d }
        var updated = VerdictTracker(), reset = VerdictTracker()
        _ = updated.reset(state: s, extra: extra)
        _ = reset.reset(state: s, extra: extra)
        for (i, step) in steps.enumerated() {
            let before = s.decisions
            s.decisions = step(s.decisions)
            let events = updated.update(s.decisions.apps(differingFrom: before), state: s)
            XCTAssertEqual(events, reset.reset(state: s, extra: extra), "step \(i)")
            for app in s.config.apps {
                XCTAssertEqual(updated.verdict(app.id), reset.verdict(app.id), "step \(i): \(app.id)")
                for uid: UInt32 in [1000, 1001] {
                    XCTAssertEqual(updated.verdict(app.id, uid: uid), reset.verdict(app.id, uid: uid), "step \(i): \(app.id) of \(uid)")
                }
            }
            // Both go on alike: their permission sets are the same (refresh's order is its sets', so by app here).
            var (u, r) = (updated, reset), moved = s
            moved.network = NetworkState(routedLinks: [wwan])
            func keyed(_ events: [Event]) -> [String: Event] {
                Dictionary(events.map { e -> (String, Event) in
                    guard case let .app(v) = e else { return ("", e) }
                    return ("\(v.app) \(v.uid.map(String.init) ?? "-")", e)
                }, uniquingKeysWith: { a, _ in a })
            }
            XCTAssertEqual(keyed(u.refresh(state: moved)), keyed(r.refresh(state: moved)), "step \(i)")
        }
        XCTAssertEqual(updated.update([], state: s), [])
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
        XCTAssertEqual(events["b"]?.kinds.denied, [.wwan])
        XCTAssertEqual(events["d"]?.reason, .awaitingDecision)
        XCTAssertEqual(events["d"]?.kinds.pending, [.wwan])
        XCTAssertEqual(events["e"]?.reason, .denied)
        // The tracker now answers with the new verdicts.
        XCTAssertEqual(t.verdict("c")?.via?.name, "wwan0")
        XCTAssertEqual(t.verdict("d")?.reason, .awaitingDecision)
        XCTAssertEqual(t.refresh(state: try state([wwan])), [])
    }

    /// Cellular gets a better metric, so the kernel sends traffic by it: the apps allowed on it switch to it; the
    /// others, whose traffic would now leave by a link they may not use, are routed elsewhere and told to bind to
    /// Ethernet.
    func testRefreshWhenTheRouteMoves() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        let better = makeLink(4, "wwan0", .wwan, metric: 50)
        let events = byApp(t.refresh(state: try state([eth, better])))
        XCTAssertEqual(Set(events.keys), ["a", "b", "c", "d", "e"])
        XCTAssertEqual(events["a"]?.via?.name, "wwan0")
        XCTAssertEqual(events["c"]?.via?.name, "wwan0")
        for app in ["b", "d", "e"] {
            XCTAssertEqual(events[app]?.reason, .routedElsewhere, app)
            XCTAssertNil(events[app]?.via, app)
            XCTAssertEqual(events[app]?.bindTo?.name, "eth0", app)
            XCTAssertEqual(events[app]?.egress[.ipv4], .link(better, allowed: false), app)
        }
        XCTAssertEqual(events["d"]?.kinds.pending, [.wwan])
        XCTAssertEqual(t.verdict("b")?.reason, .routedElsewhere)
        // And back: the kernel routes by Ethernet again.
        let back = byApp(t.refresh(state: try state([eth, wwan])))
        XCTAssertEqual(Set(back.keys), ["a", "b", "c", "d", "e"])
        XCTAssertTrue(back.values.allSatisfy { $0.reason == .ok && $0.via?.name == "eth0" && $0.bindTo == nil })
    }

    /// Only the apps whose verdict changed hear: a Wi-Fi link whose route is better than Ethernet's but worse than
    /// cellular's becomes where b and d should bind, and one of e's denied kinds; a and c, still ok via wwan0, hear
    /// nothing.
    func testRefreshOnlyForAffectedApps() throws {
        var t = VerdictTracker()
        let better = makeLink(4, "wwan0", .wwan, metric: 50)
        _ = t.reset(state: try state([eth, better]), extra: [])
        let events = byApp(t.refresh(state: try state([eth, better, makeLink(7, "wlan0", .wifi, metric: 55)])))
        XCTAssertEqual(Set(events.keys), ["b", "d", "e"])
        XCTAssertEqual(events["b"]?.bindTo?.name, "wlan0")
        XCTAssertEqual(events["d"]?.bindTo?.name, "wlan0")
        XCTAssertEqual(events["e"]?.bindTo?.name, "eth0", "e may not use Wi-Fi")
        XCTAssertEqual(events["e"]?.kinds.denied, [.wifi, .wwan])
        XCTAssertEqual(t.verdict("a")?.via?.name, "wwan0")
    }

    /// The links stay as they are, only where the kernel sends traffic changes (a rule, a route in another table):
    /// IPv6 now leaves by cellular. The apps allowed on it are still ok, with an egress that says so; the others are
    /// not ok any more, though their IPv4 still works by Ethernet.
    func testEgressOnlyChangeIsAnEvent() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan], egress: [.ipv4: .link(2)]), extra: [])
        XCTAssertTrue(t.all.allSatisfy { $0.reason == .ok && $0.via?.name == "eth0" })
        let events = byApp(t.refresh(state: try state([eth, wwan], egress: [.ipv4: .link(2), .ipv6: .link(4)])))
        XCTAssertEqual(Set(events.keys), ["a", "b", "c", "d", "e"])
        XCTAssertEqual(events["a"]?.reason, .ok)
        XCTAssertEqual(events["a"]?.via?.name, "eth0")
        XCTAssertEqual(events["a"]?.egress[.ipv6], .link(wwan, allowed: true))
        for app in ["b", "d", "e"] {
            XCTAssertEqual(events[app]?.reason, .routedElsewhere, app)
            XCTAssertEqual(events[app]?.bindTo?.name, "eth0", app)
            XCTAssertEqual(events[app]?.egress[.ipv4], .link(eth, allowed: true), app)
            XCTAssertEqual(events[app]?.egress[.ipv6], .link(wwan, allowed: false), app)
        }
        // The same picture again: quiet.
        XCTAssertEqual(t.refresh(state: try state([eth, wwan], egress: [.ipv4: .link(2), .ipv6: .link(4)])), [])
    }

    /// A metric change that does not move the kernel's route, and unusable links appearing whose routes the kernel
    /// does not choose: no app event.
    func testIrrelevantNetworkChangesAreQuiet() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth, wwan]), extra: [])
        let eth90 = makeLink(2, "eth0", .ethernet, metric: 90)
        XCTAssertEqual(t.refresh(state: try state([eth90, wwan])), [])
        XCTAssertEqual(t.refresh(state: try state([eth90, wwan, makeLink(7, "wlan0", .wifi, metric: nil),
                                                   makeLink(8, "usb0", .other, metric: 1000, carrier: false)])), [])
        // The same carrier-less link with the best route is not irrelevant: the kernel sends the traffic into it.
        let dead = byApp(t.refresh(state: try state([eth90, wwan, makeLink(7, "wlan0", .wifi, metric: nil),
                                                     makeLink(8, "usb0", .other, metric: 1, carrier: false)])))
        XCTAssertEqual(Set(dead.keys), ["a", "b", "c", "d", "e"])
        XCTAssertTrue(dead.values.allSatisfy { $0.reason == .routedElsewhere && $0.bindTo?.name == "eth0" })
    }

    /// A Wi-Fi link with a worse metric appears: apps allowed on it keep their via and hear nothing; the app that
    /// denies Wi-Fi hears that its denied_kinds changed.
    func testDeniedKindsChangeIsAnEvent() throws {
        var t = VerdictTracker()
        _ = t.reset(state: try state([eth]), extra: [])
        let events = byApp(t.refresh(state: try state([eth, makeLink(7, "wlan0", .wifi, metric: 600)])))
        XCTAssertEqual(Set(events.keys), ["e"], "only e's verdict changed (denied_kinds gains wifi)")
        XCTAssertEqual(events["e"]?.kinds.denied, [.wifi])
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
        XCTAssertEqual(gone["d"]?.kinds.denied, [.wwan])
        XCTAssertEqual(gone["d"]?.sources[.wwan], .noAgent)
        XCTAssertEqual(gone["d"]?.unaskedKinds, [.wwan])
        XCTAssertEqual(t.verdict("b")?.unaskedKinds, [], "b's deny is the policy's")

        s.agents = 2
        let back = byApp(t.reset(state: s, extra: []))
        XCTAssertEqual(Set(back.keys), ["d"])
        XCTAssertEqual(back["d"]?.reason, .awaitingDecision)
        XCTAssertEqual(back["d"]?.kinds.pending, [.wwan])
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
        let events = byApp(t.reset(state: try state(links, config: changed), extra: [(curl, nil)]))
        XCTAssertEqual(Set(events.keys), ["a", "b"])
        XCTAssertEqual(events["a"]?.permissions.wifi, .ask)
        XCTAssertEqual(events["b"]?.reason, .denied)
        XCTAssertEqual(events["b"]?.kinds.denied, [.wwan, .ethernet])
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
        _ = t.reset(state: s, extra: [(AppMatch(id: "b", matchedBy: .defaults, app: nil), nil)])
        XCTAssertEqual(t.verdict("b")?.matchedBy, .name)
        XCTAssertEqual(t.verdict("b")?.permissions.wwan, .deny)
        XCTAssertEqual(t.all.count, 5)
    }

    func testRenamed() {
        let v = Verdict.compute(app: "", matchedBy: .name, permissions: .builtIn,
                                network: NetworkState(routedLinks: [eth]), ready: true)
        let r = v.renamed("x", .unit)
        XCTAssertEqual(r.app, "x")
        XCTAssertEqual(r.matchedBy, .unit)
        XCTAssertEqual(r.via, v.via)
        XCTAssertEqual(r.permissions, v.permissions)
    }

    /// Untracking forgets a derived app: no verdict, no event; a policy app cannot be untracked.
    func testUntrack() throws {
        var t = VerdictTracker()
        let s = try state([eth, wwan])
        _ = t.reset(state: s, extra: [])
        t.track(AppMatch(id: "curl", matchedBy: .defaults, app: nil), state: s)
        t.untrack("curl", state: s)
        t.untrack("a", state: s)
        t.untrack("nosuch", state: s)
        XCTAssertNil(t.verdict("curl"))
        XCTAssertEqual(t.all.map(\.app), ["a", "b", "c", "d", "e"])
        XCTAssertEqual(Set(byApp(t.refresh(state: try state([wwan]))).keys), ["a", "b", "c", "d", "e"])
        // Tracked again later, it starts from the network as it is then (its set's template was dropped).
        t.track(AppMatch(id: "curl", matchedBy: .executable, app: nil), state: try state([wwan]))
        XCTAssertEqual(t.verdict("curl")?.reason, .awaitingDecision)
        XCTAssertEqual(t.verdict("curl")?.matchedBy, .executable)
    }

    /// The only app of its permission set leaves and comes back after the network changed: its verdict is the
    /// new network's, not the one its set had when it left.
    func testUntrackedSetIsNotStale() throws {
        var t = VerdictTracker()
        let config = try parsePolicy("[App a]\nUser=1\n")
        _ = t.reset(state: try state([eth], config: config), extra: [])
        let odd = AppMatch(id: "odd", matchedBy: .defaults, app: nil)
        var s = try state([eth], config: config)
        s.decisions.set("odd", .wwan, .allow, once: false)
        t.track(odd, state: s)
        t.untrack("odd", state: s)
        var later = try state([wwan], config: config)
        later.decisions.set("odd", .wwan, .allow, once: false)
        _ = t.refresh(state: later)
        t.track(odd, state: later)
        XCTAssertEqual(t.verdict("odd")?.via?.name, "wwan0")
    }
}
