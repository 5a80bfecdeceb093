// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
import XCTest

/// Mode=steer's plan: who gets which mark (the ruleset's owners, unit before uid), one table per combination of
/// allowed kinds and Metered= in use, each table's routes (copies through allowed links that are up, an unreachable
/// default per family), the diff with the kernel, and the engine handing plans to the edge.
final class SteeringPlanTests: XCTestCase {
    private let cgroups = UnitCgroups(nftRoot: "unified", units: [
        UnitCgroup(path: "system.slice/cron.service", level: 2, unit: "cron.service", id: 77),
        UnitCgroup(path: "system.slice/backup.service", level: 2, unit: "backup.service", id: 78),
    ])
    private let wlan = makeLink(3, "wlan0", .wifi, metric: 600)
    private let wwan = makeLink(4, "wwan0", .wwan, metric: 100)

    private func plan(_ policy: String, links: [Link]) throws -> SteeringPlan {
        let config = try parsePolicy(policy)
        let r = Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) }, links: links,
                              cgroups: cgroups)
        return SteeringPlan.build(ruleset: r, apps: config.apps, permissions: { config.permissions(for: $0) },
                                  links: links)
    }

    private func route(_ oif: Int32, _ dst: [UInt8], _ len: UInt8, via: [UInt8]? = nil, metric: UInt32) -> SteerRoute {
        SteerRoute(family: .ipv4, table: 254, kind: .unicast, destination: dst, prefixLength: len, oif: oif,
                   gateway: via, source: via == nil ? [10, UInt8(oif), 0, 1] : nil, metric: metric,
                   scope: via == nil ? 253 : 0)
    }

    /// A user's own unit only narrows its uid (Ruleset): its mark is the intersection of both allowances, never a 0
    /// entry that would skip the uid's mark.
    func testUserUnitsOnlyNarrowTheirUid() throws {
        let users = UnitCgroups(nftRoot: "", units: [
            UnitCgroup(path: "user.slice/user-4001.slice/user@4001.service/app.slice/app-wide.scope", level: 5,
                       unit: "app-wide.scope", id: 91, user: true),
            UnitCgroup(path: "user.slice/user-4003.slice/user@4003.service/app.slice/app-frugal.scope", level: 5,
                       unit: "app-frugal.scope", id: 92, user: true),
        ])
        let config = try parsePolicy("""
            [App wifionly]
            User=4001
            WWAN=deny
            [App anywhere]
            User=4003
            WWAN=allow
            [App wide]
            UserUnit=app-wide.scope
            WWAN=allow
            [App frugal]
            UserUnit=app-frugal.scope
            WWAN=allow
            Metered=deny
            """)
        let links = [Links.lo, wlan, wwan]
        let r = Ruleset.build(apps: config.apps, permissions: { config.permissions(for: $0) }, links: links, cgroups: users)
        let p = SteeringPlan.build(ruleset: r, apps: config.apps, permissions: { config.permissions(for: $0) }, links: links)
        XCTAssertEqual(p.uidMarks, [4001: SteeringPlan.Allowance(bits: 0b11101).mark])
        XCTAssertEqual(p.cgroupMarks, [91: SteeringPlan.Allowance(bits: 0b11101).mark,
                                       92: SteeringPlan.Allowance(bits: 0b01111).mark],
                       "app-wide allows everything but keeps uid 4001's wifi-only mark; app-frugal narrows 4003")
    }

    func testMarksTablesAndRoutes() throws {
        let p = try plan("""
            [App wifionly]
            User=4001
            WWAN=deny
            [App asker]
            User=4002
            WWAN=ask
            [App anywhere]
            User=4003
            WWAN=allow
            [App frugal]
            User=4004
            WWAN=allow
            Metered=deny
            [App cron]
            Unit=cron.service
            User=4001
            WWAN=allow
            [App backup]
            Unit=backup.service
            WWAN=deny
            """, links: [Links.lo, wlan, wwan])
        // wifi, ethernet, other and metered allowed: bits 0, 2, 3, 4.
        let wifiOnly = SteeringPlan.Allowance(bits: 0b11101)
        // Every kind allowed, metered not: bits 0-3.
        let unmetered = SteeringPlan.Allowance(bits: 0b01111)
        XCTAssertEqual(wifiOnly.mark, 0x6E70_001D)
        XCTAssertEqual(wifiOnly.table, 28269)
        XCTAssertEqual(p.uidMarks, [4001: wifiOnly.mark, 4002: wifiOnly.mark, 4004: unmetered.mark],
                       "an undecided ask is not allowed; an app allowed everywhere has no mark; 4001 is wifionly's")
        XCTAssertEqual(p.cgroupMarks, [77: 0, 78: wifiOnly.mark], "a unit allowed everywhere is 0: its uid is not consulted")
        XCTAssertEqual(p.allowances, [unmetered, wifiOnly])
        XCTAssertEqual(p.rules.count, 4, "one rule per family and table")

        let main = [route(3, [0, 0, 0, 0], 0, via: [10, 3, 0, 2], metric: 600), route(3, [10, 3, 0, 0], 24, metric: 0),
                    route(4, [0, 0, 0, 0], 0, via: [10, 4, 0, 2], metric: 100), route(4, [10, 4, 0, 0], 24, metric: 0)]
        let t = p.routes(for: wifiOnly, main: main)
        XCTAssertEqual(t.filter { $0.kind == .unicast }.map(\.oif), [3, 3], "wlan0's default and prefix, not wwan0's")
        XCTAssertEqual(t.filter { $0.kind == .unreachable }.map(\.family), [.ipv4, .ipv6])
        XCTAssertTrue(t.allSatisfy { $0.table == 28269 })
        XCTAssertEqual(t.first { $0.kind == .unreachable }?.metric, 0xFFFF_FFFF, "after every copied default")
        XCTAssertEqual(p.routes(for: unmetered, main: main).filter { $0.kind == .unicast }.map(\.oif), [3, 3],
                       "wwan0 is metered")

        // wlan0 loses carrier: no route of it is copied; the lookup ends in unreachable.
        var down = wlan
        down.status.carrier = false
        let q = try plan("[App wifionly]\nUser=4001\nWWAN=deny\n", links: [Links.lo, down, wwan])
        XCTAssertEqual(q.routes(for: wifiOnly, main: main).map(\.kind), [.unreachable, .unreachable])
    }

    func testDiffAddsBeforeItRemoves() throws {
        let p = try plan("[App wifionly]\nUser=4001\nWWAN=deny\n", links: [wlan, wwan])
        let main = [route(3, [0, 0, 0, 0], 0, via: [10, 3, 0, 2], metric: 600)]
        let stale = SteerRoute.unreachableDefault(.ipv4, table: 28250)
        let d = SteeringDiff(plan: p, main: main, tables: [stale],
                             rules: [SteerRule(family: .ipv4, mark: 0x6E70_000A, table: 28250)])
        XCTAssertEqual(d.addRoutes.count, 3, "the default via wlan0 and two unreachable defaults")
        XCTAssertEqual(d.addRules.map(\.table), [28269, 28269])
        XCTAssertEqual(d.deleteRules.map(\.table), [28250])
        XCTAssertEqual(d.deleteRoutes, [stale])
        let all = Set(p.routes(for: p.allowances[0], main: main))
        XCTAssertTrue(SteeringDiff(plan: p, main: main, tables: Array(all), rules: p.rules).isEmpty, "in step: nothing")
        let removal = SteeringDiff(plan: nil, main: main, tables: Array(all), rules: p.rules)
        XCTAssertEqual(removal.deleteRoutes.count, 3)
        XCTAssertEqual(removal.deleteRules.count, 2)
        XCTAssertTrue(removal.addRoutes.isEmpty && removal.addRules.isEmpty)
    }

    /// A marked socket bound to an address of a link its mark does not allow goes to the table that allows nothing:
    /// per mark in use, a source rule for each such address (up or not; IPv6 link-local ones aside), and that
    /// table's unreachable defaults; none for an allowed link's addresses.
    func testAddressesOfADeniedLinkGoNowhere() throws {
        var wwan = self.wwan, wlan = self.wlan, down = makeLink(5, "wwan1", .wwan, up: false)
        wwan.addresses = ["10.81.0.1/24", "fd00:81::1/64", "fe80::1/64"]
        wlan.addresses = ["10.82.0.1/24"]
        down.addresses = ["10.83.0.1/24"]
        let p = try plan("[App wifionly]\nUser=4001\nWWAN=deny\n[App anywhere]\nUser=4002\nWWAN=allow\n", links: [wlan, wwan, down])
        let mark: UInt32 = 0x6E70_001D
        XCTAssertEqual(p.sourceRules, [SteerRule(family: .ipv4, mark: mark, table: 28240, source: "10.81.0.1"),
                                       SteerRule(family: .ipv6, mark: mark, table: 28240, source: "fd00:81::1"),
                                       SteerRule(family: .ipv4, mark: mark, table: 28240, source: "10.83.0.1")])
        XCTAssertEqual(p.sourceRules.map(\.priority), [28238, 28238, 28238], "before the marks' rules (28239)")
        XCTAssertEqual(p.rules.count, 2 + 3)
        let d = SteeringDiff(plan: p, main: [], tables: [], rules: [])
        XCTAssertEqual(Set(d.addRoutes.filter { $0.table == 28240 }), [.unreachableDefault(.ipv4, table: 28240),
                                                                        .unreachableDefault(.ipv6, table: 28240)])
        XCTAssertEqual(d.addRules.count, 5)
        XCTAssertEqual(try plan("[App anywhere]\nUser=4002\nWWAN=allow\n", links: [wlan, wwan]).sourceRules, [],
                       "no mark in use: no source rule")
    }

    /// 10,000 apps are map elements; the tables stay as many as the combinations in use (at most 31).
    func testTenThousandApps() throws {
        var policy = ""
        for i in 0..<10_000 { policy += "[App a\(i)]\nUser=\(20_000 + i)\nWWAN=\(["deny", "allow", "ask"][i % 3])\nMetered=\(i % 5 == 0 ? "deny" : "allow")\n" }
        let start = ContinuousClock.now
        let p = try plan(policy, links: [wlan, wwan])
        let took = ContinuousClock.now - start
        let everywhere = (0..<10_000).filter { $0 % 3 == 1 && $0 % 5 != 0 }.count
        XCTAssertEqual(p.uidMarks.count, 10_000 - everywhere, "apps allowed everywhere are not marked")
        XCTAssertEqual(p.allowances.count, 3)
        XCTAssertLessThan(took, .seconds(5), "built in \(took)")
    }

    /// The engine hands the edge a plan in Mode=steer, a new one when links or decisions change it, none when
    /// nothing it depends on changed, and removes steering on Mode=block (a stop leaves it). A steered app's
    /// verdict is its table's answer: via the allowed link, not routed-elsewhere.
    func testEngineHandsPlansToTheEdge() {
        let policy = "[Enforcement]\nMode=steer\n[App wifionly]\nUser=4001\nWWAN=deny\n[App asker]\nUser=4002\nWWAN=ask\n"
        let h = EngineHarness(policy: policy, links: [Links.lo, wlan, wwan])
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(h.steering.count, 1)
        XCTAssertEqual(h.steering.last??.uidMarks.count, 2)
        let v = h.request(h.connect(), "QUERY wifionly")
        XCTAssertEqual(v["reason"], "ok")
        XCTAssertEqual(v["via"]?["name"], "wlan0", "steered: the table's answer, not main's wwan0")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["steering"]?["tables"], 1)

        var noCarrier = wlan
        noCarrier.status.carrier = false
        h.setLinks([Links.lo, noCarrier, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(h.steering.count, 2, "wlan0 lost carrier: a new plan without it")
        XCTAssertEqual(h.request(h.connect(), "QUERY wifionly")["available"], false)
        h.setLinks([Links.lo, noCarrier, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(h.steering.count, 2, "nothing changed: no plan")

        _ = h.request(h.connect(), "DECIDE asker wwan allow")
        XCTAssertEqual(h.steering.last??.uidMarks.count, 1, "asker may use everything now: unmarked")

        h.reload(policy: policy.replacingOccurrences(of: "Mode=steer", with: "Mode=block"))
        XCTAssertEqual(h.steering.count, 4)
        XCTAssertNil(h.steering.last!, "Mode=block removes steering")
        h.reload(policy: policy)
        let plans = h.steering.count
        h.feed(.stopping)
        XCTAssertEqual(h.steering.count, plans, "a stop leaves steering's rules and tables in force")
        XCTAssertEqual(h.request(h.connect(), "QUERY wifionly")["reason"], "denied", "blocked, not steered: wlan0 has no carrier")
    }

    /// The engine decides what the Steerer does after its plan: every change of the kernel's picture syncs the
    /// tables with the main table; a plan the kernel refused is installed again by the next change, and STATUS says
    /// so until one goes through.
    func testTheEngineFollowsTheKernelAndInstallsAgain() {
        let h = EngineHarness(policy: "[Enforcement]\nMode=steer\n[App wifionly]\nUser=4001\nWWAN=deny\n",
                              links: [Links.lo, wlan, wwan])
        var from = 0
        func steps() -> [String] {
            h.transcript[from...].filter { $0.hasPrefix("steer") }.map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        }
        h.steerError = EdgeError(.steer, errno: EPERM, "bpf: Operation not permitted")
        from = h.transcript.count
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(steps(), ["steer follow sync"], "installed: the tables follow the main table")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["steering"]?["state"], "failed")
        from = h.transcript.count
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(steps(), ["steer follow [1852833821]"], "the sync failed: installed again")
        h.steerError = nil
        from = h.transcript.count
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(steps(), ["steer follow [1852833821]"], "failed again: installed again")
        XCTAssertEqual(h.request(h.connect(), "STATUS")["enforcement"]?["steering"]?["state"], "steering")
        from = h.transcript.count
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        XCTAssertEqual(steps(), ["steer follow sync"], "in force again: synced")
    }

    /// A WAIT held while the rules are refused (not enforced: the main table's verdict, routed elsewhere) is answered
    /// when they are in force (steered: via wlan0), though nothing in the network changed.
    func testWaitIsAnsweredWhenSteeringTakesEffect() {
        let h = EngineHarness(policy: "[Enforcement]\nMode=steer\n[App wifionly]\nUser=4001\nWWAN=deny\n",
                              links: [Links.lo, wlan, wwan], started: false)
        h.rulesError = EdgeError(.loadRules, errno: EPERM, "Operation not permitted")
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)])
        h.feed(.started)
        XCTAssertEqual(h.request(h.connect(), "QUERY wifionly")["reason"], "routed-elsewhere")
        let waiter = h.connect(Peers.admin)
        XCTAssertEqual(h.send(waiter, "WAIT wifionly 30"), [], "held")
        h.rulesError = nil
        h.advance(bySeconds: 1)
        XCTAssertEqual(h.takeParsed(waiter).last?["via"]?["name"], "wlan0", "answered once steering holds")
    }

    /// Once the kernel has been asked with the mark (`ip route get ... mark M`), its answer is the verdict's: here
    /// another tool's rule sends the mark elsewhere than the copied table would.
    func testTheKernelsMarkedAnswerWins() {
        let h = EngineHarness(policy: "[Enforcement]\nMode=steer\n[App wifionly]\nUser=4001\nWWAN=deny\n",
                              links: [Links.lo, wlan, wwan])
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)],
                   markedEgress: [0x6E70_001D: [.ipv4: .blocked(.unreachable), .ipv6: .blocked(.unreachable)]])
        let v = h.request(h.connect(), "QUERY wifionly")
        XCTAssertEqual(v["available"], false)
        XCTAssertEqual(v["egress"]?["ipv4"]?["blocked"], "unreachable")
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)], markedEgress: [0x6E70_001D: [.ipv4: .link(3)]])
        XCTAssertEqual(h.request(h.connect(), "QUERY wifionly")["via"]?["name"], "wlan0")
    }

    /// A steered app hears of its steered verdict changing though its main-table verdict (which the tracker
    /// compares) did not: here only the kernel's answer for its mark changes.
    func testAppEventWhenOnlyTheSteeredVerdictChanges() {
        let h = EngineHarness(policy: "[Enforcement]\nMode=steer\n[App wifionly]\nUser=4001\nWWAN=deny\n",
                              links: [Links.lo, wlan, wwan])
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)], markedEgress: [0x6E70_001D: [.ipv4: .link(3)]])
        let c = h.connect(Peers.admin)
        _ = h.send(c, "SUBSCRIBE apps")
        _ = h.take(c)
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)],
                   markedEgress: [0x6E70_001D: [.ipv4: .blocked(.unreachable)]])
        let events = h.takeEvents(c, named: "app")
        XCTAssertEqual(events.count, 1, "\(events)")
        XCTAssertEqual(events.first?["app"], "wifionly")
        XCTAssertEqual(events.first?["available"], false)
        h.setLinks([Links.lo, wlan, wwan], egress: [.ipv4: .link(4)],
                   markedEgress: [0x6E70_001D: [.ipv4: .blocked(.unreachable)]])
        XCTAssertEqual(h.takeEvents(c, named: "app"), [], "nothing changed: no event")
    }
}
