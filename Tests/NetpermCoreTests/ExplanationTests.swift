// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol
import XCTest

/// The one "why not" (Explanation.swift): each reason and each source of a closed kind, as every face shows it (the
/// GLib module's can_reach() error, netpermctl's why:, WAIT's time-out).
final class ExplanationTests: XCTestCase {
    private let wlan = makeLink(3, "wlan0", .wifi)
    private let wwan = makeLink(4, "wwan0", .wwan)

    private func verdict(_ reason: Verdict.Reason, denied: [PolicyDimension] = [], pending: [PolicyDimension] = [],
                         permissions: PermissionSet = PermissionSet(wifi: .allow, wwan: .deny, ethernet: .allow, other: .allow,
                                                                    metered: .allow),
                         sources: PermissionSources = [:], egress: PerFamily<Verdict.Route> = [:],
                         bindTo: Link? = nil) -> Verdict {
        Verdict(app: "maps", matchedBy: .name, permissions: permissions, sources: sources, available: reason == .ok,
                reason: reason, via: reason == .ok ? wlan : nil, egress: egress, bindTo: bindTo, kinds: Verdict.Kinds(denied: denied, pending: pending))
    }

    func testEachReason() {
        XCTAssertNil(verdict(.ok).message)
        XCTAssertEqual(verdict(.noNetwork).message, "maps cannot use the network: no link is usable")
        XCTAssertEqual(verdict(.denied, denied: [.wwan]).message, "maps may not use wwan: its policy denies it")
        XCTAssertEqual(verdict(.awaitingDecision, pending: [.wwan, .metered]).message,
                       "maps may not use wwan or metered links yet: waiting for your answer")
        XCTAssertEqual(verdict(.starting).message, "netpermd is still starting")
    }

    /// Several kinds, each with where its deny comes from; a user's own decisions say whose they are.
    func testEverySourceOfADeny() {
        let all = PermissionSet(wifi: .deny, wwan: .deny, ethernet: .allow, other: .allow, metered: .deny)
        XCTAssertEqual(verdict(.denied, denied: [.wifi, .wwan, .metered], permissions: all,
                               sources: [.wifi: .decision, .wwan: .noAgent, .metered: .once]).message,
                       "maps may not use wifi (a decision denies it), wwan (its policy says ask and no agent is there to "
                       + "ask the user) or metered links (a decision denies it until netpermd restarts or its policy changes)")
        XCTAssertEqual(verdict(.denied, denied: [.wifi, .wwan], permissions: all,
                               sources: [.wifi: .userDecision, .wwan: .userOnce]).message,
                       "maps may not use wifi (its user's decision denies it) or wwan (its user's decision denies it "
                       + "until netpermd restarts or its policy changes)")
        XCTAssertEqual(verdict(.denied, denied: [.wifi, .metered], permissions: all, sources: [.metered: .budget]).message,
                       "maps may not use wifi (its policy denies it) or metered links (its metered budget for this period "
                       + "is used up)")
    }

    /// Used up is used up, with or without `used`, and said in the units netpermctl uses.
    func testABudgetUsedUp() {
        var v = verdict(.budgetExhausted, denied: [.metered],
                        permissions: PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow, metered: .deny),
                        sources: [.metered: .budget])
        XCTAssertEqual(v.message, "maps may not use metered links: its metered budget for this period is used up")
        v.budget = BudgetFact(limit: 1_048_576, used: 986_023, exhausted: true, enforced: true,
                              periodStart: CivilDate(year: 2026, month: 12, day: 1), periodEnd: CivilDate(year: 2027, month: 1, day: 1))
        XCTAssertEqual(v.message, "maps may not use metered links: it has used up its metered budget of 1 MiB for this "
                       + "period; they open again on 2027-01-01")
    }

    /// The link it may not use, the metered setting where the kind is allowed, a blocking route, a link without
    /// carrier, no route; and the link it could bind to.
    func testRoutedElsewhere() {
        XCTAssertEqual(verdict(.routedElsewhere, egress: [.ipv4: .link(wwan, allowed: false)], bindTo: wlan).message,
                       "maps may not use wwan: its policy denies it (the kernel routes its traffic by wwan0; it may use wlan0)")
        XCTAssertEqual(verdict(.routedElsewhere,
                               permissions: PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow, metered: .deny),
                               egress: [.ipv4: .link(wwan, allowed: false)], bindTo: wlan).message,
                       "maps may not use metered links: its policy denies it (the kernel routes its traffic by wwan0; it "
                       + "may use wlan0)")
        XCTAssertEqual(verdict(.routedElsewhere, egress: [.ipv4: .blocked(.blackhole)], bindTo: wlan).message,
                       "the kernel routes maps's traffic into a blackhole route; it may use wlan0")
        XCTAssertEqual(verdict(.routedElsewhere, egress: [.ipv4: .blocked(.unreachable)]).message,
                       "the kernel routes maps's traffic into an unreachable route")
        let down = makeLink(3, "wlan0", .wifi, carrier: false)
        XCTAssertEqual(verdict(.routedElsewhere, egress: [.ipv4: .link(down, allowed: true)], bindTo: wwan).message,
                       "the kernel routes maps's traffic by wlan0, which is not usable; it may use wwan0")
        XCTAssertEqual(verdict(.routedElsewhere).message, "the kernel has no route for maps's traffic")
    }

    /// Toward a REACH's destination, the link it would leave by.
    func testTowardADestination() {
        var v = verdict(.denied, denied: [.wwan], egress: [.ipv4: .link(wwan, allowed: false)])
        v.destination = "10.64.0.9"
        XCTAssertEqual(v.message, "maps may not use wwan: its policy denies it (the kernel sends traffic for 10.64.0.9 by wwan0)")
    }
}
