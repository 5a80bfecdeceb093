// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermPolicy
import NetpermProtocol
import XCTest

/// The verdict for every combination of link kinds, route layouts and permissions, against an oracle written from
/// the rules rather than from the code:
/// - not ready: `starting`, nothing else reported (no egress, no via, no bind_to, no kinds);
/// - a link is usable when admin up, with carrier and a default route; loopback never counts;
/// - each family the kernel routes by a link is reported in `egress` with that link, `allowed` when the app may use
///   its kind. Through a usable link the family works (allowed) or leaks (not allowed); through a link without
///   carrier (a linkdown route the kernel still chooses) it does neither. A blocking route is reported as
///   `blocked`, no route as null;
/// - `ok` only when some family works and none leaks; via: the first working family's link (IPv4, then IPv6);
/// - otherwise: no usable link at all -> `no-network`; some usable link of an allowed kind -> `routed-elsewhere`,
///   bind_to the one with the lowest metric (tie: lowest index); else `awaiting-decision` if some usable link's kind
///   is `ask`, else `denied`;
/// - denied_kinds / pending_kinds: kinds of usable links set to deny / ask, in the order wifi, wwan, ethernet, other.
/// - Metered= on top: a metered link (cellular always; Wi-Fi in the "hotspot" rows) is allowed only if its kind is
///   allowed and Metered= is allow. `metered` is denied when a usable metered link exists and Metered=deny. A link
///   that something denies contributes nothing to pending (a decision would not open it): a pending setting is an
///   `ask` (its kind's, or Metered='s on a metered link) of a usable link with no deny in the way. `metered` is
///   reported after the kinds.
final class VerdictTests: XCTestCase {
    private static let kinds: [LinkKind] = [.wifi, .wwan, .ethernet, .other]

    /// A verdict as text, so that the struct, its JSON and the oracle compare as one value. Links are
    /// "index name kind [metered]"; an egress link adds "usable"/"unusable" and "allowed"/"not-allowed".
    /// A row whose JSON is read back: one per outcome, Metered= and hotspot.
    private struct JSONKey: Hashable {
        var want: Expected
        var metered: Permission
        var hotspot: Bool
    }

    private struct Expected: Hashable {
        var available: Bool
        var reason: String
        var via: String?
        /// IPv4's, IPv6's.
        var egress: [String?]
        var bindTo: String?
        var denied: [String]
        var pending: [String]

        static func starting() -> Expected {
            Expected(available: false, reason: "starting", via: nil, egress: [nil, nil], bindTo: nil, denied: [],
                     pending: [])
        }
    }

    private static func ref(_ index: Int, _ name: String, _ kind: String, _ metered: Bool) -> String {
        "\(index) \(name) \(kind)" + (metered ? " metered" : "")
    }

    private static func ref(_ l: Link) -> String { ref(Int(l.index), l.name, l.kind.rawValue, l.metered) }

    private static func egress(_ l: Link, usable: Bool, allowed: Bool) -> String {
        ref(l) + (usable ? " usable" : " unusable") + (allowed ? " allowed" : " not-allowed")
    }

    private static func perm(_ p: PermissionSet, _ k: LinkKind) -> Permission {
        switch k {
        case .wifi: return p.wifi
        case .wwan: return p.wwan
        case .ethernet: return p.ethernet
        case .other: return p.other
        case .loopback: return .deny // never a way out; no layout routes by it
        }
    }

    private func oracle(_ links: [Link], _ egress: [AddressFamily: Egress], _ p: PermissionSet,
                        ready: Bool) -> Expected {
        var e = Expected.starting()
        guard ready else { return e }
        func usable(_ l: Link) -> Bool { l.status.adminUp && l.status.carrier && l.metric != nil && l.kind != .loopback }
        func allowed(_ l: Link) -> Bool { Self.perm(p, l.kind) == .allow && (p.metered == .allow || !l.metered) }
        /// Something says deny for this link: its kind, or Metered= when it is metered.
        func deniedOutright(_ l: Link) -> Bool { Self.perm(p, l.kind) == .deny || (l.metered && p.metered == .deny) }
        let usableLinks = links.filter(usable)
        var working: [Link] = []
        var leaks = false
        for (i, family) in [AddressFamily.ipv4, .ipv6].enumerated() {
            switch egress[family] {
            case nil:
                break
            case let .blocked(b)?:
                e.egress[i] = "blocked \(b.rawValue)"
            case let .link(index)?:
                guard let l = links.first(where: { $0.index == index }) else { break }
                e.egress[i] = Self.egress(l, usable: usable(l), allowed: allowed(l))
                guard usable(l) else { break }
                if allowed(l) { working.append(l) } else { leaks = true }
            }
        }
        e.denied = Self.kinds.filter { k in usableLinks.contains { $0.kind == k } && Self.perm(p, k) == .deny }
            .map(\.rawValue)
        if p.metered == .deny && usableLinks.contains(where: \.metered) { e.denied.append("metered") }
        let openable = usableLinks.filter { !deniedOutright($0) }
        e.pending = Self.kinds.filter { k in openable.contains { $0.kind == k } && Self.perm(p, k) == .ask }
            .map(\.rawValue)
        if p.metered == .ask && openable.contains(where: \.metered) { e.pending.append("metered") }
        if let first = working.first, !leaks {
            e.available = true
            e.reason = "ok"
            e.via = Self.ref(first)
            return e
        }
        if usableLinks.isEmpty {
            e.reason = "no-network"
            return e
        }
        var best: Link?
        for l in usableLinks where allowed(l) {
            guard let b = best else { best = l; continue }
            if l.metric! < b.metric! || (l.metric! == b.metric! && l.index < b.index) { best = l }
        }
        if let best {
            e.reason = "routed-elsewhere"
            e.bindTo = Self.ref(best)
        } else {
            e.reason = e.pending.isEmpty ? "denied" : "awaiting-decision"
        }
        return e
    }

    private func actual(_ v: Verdict) -> Expected {
        func route(_ r: Verdict.Route?) -> String? {
            switch r {
            case nil: return nil
            case let .blocked(b)?: return "blocked \(b.rawValue)"
            case let .link(l, allowed)?: return Self.egress(l, usable: l.usable, allowed: allowed)
            }
        }
        return Expected(available: v.available, reason: v.reason.rawValue, via: v.via.map(Self.ref),
                        egress: [route(v.egress[.ipv4]), route(v.egress[.ipv6])], bindTo: v.bindTo.map(Self.ref),
                        denied: v.kinds.denied.map(\.rawValue), pending: v.kinds.pending.map(\.rawValue))
    }

    /// What the JSON says must be the same as the struct, member for member and in order.
    private func fromJSON(_ j: JSON) -> Expected {
        func ref(_ r: JSON?) -> String? {
            guard let r, r != .null else { return nil }
            guard r.keys == ["index", "name", "kind", "metered", "roaming", "over"], r["over"] == .null, r["roaming"] == false, let i = r["index"]?.intValue,
                  let n = r["name"]?.stringValue, let k = r["kind"]?.stringValue, let m = r["metered"]?.boolValue
            else { return "malformed \(r.encoded())" }
            return Self.ref(i, n, k, m)
        }
        func route(_ r: JSON?) -> String? {
            guard let r, r != .null else { return nil }
            if r.keys == ["blocked"], let b = r["blocked"]?.stringValue { return "blocked \(b)" }
            guard r.keys == ["index", "name", "kind", "metered", "roaming", "over", "usable", "allowed"], r["over"] == .null,
                  r["roaming"] == false,
                  let i = r["index"]?.intValue, let n = r["name"]?.stringValue, let k = r["kind"]?.stringValue,
                  let m = r["metered"]?.boolValue, let u = r["usable"]?.boolValue, let a = r["allowed"]?.boolValue
            else { return "malformed \(r.encoded())" }
            return Self.ref(i, n, k, m) + (u ? " usable" : " unusable") + (a ? " allowed" : " not-allowed")
        }
        let egress = j["egress"]
        return Expected(available: j["available"]?.boolValue ?? false, reason: j["reason"]?.stringValue ?? "?",
                        via: ref(j["via"]),
                        egress: egress?.keys == ["ipv4", "ipv6"] ? [route(egress?["ipv4"]), route(egress?["ipv6"])]
                                                                  : ["malformed egress"],
                        bindTo: ref(j["bind_to"]),
                        denied: j["denied_kinds"]?.arrayValue?.compactMap(\.stringValue) ?? ["?"],
                        pending: j["pending_kinds"]?.arrayValue?.compactMap(\.stringValue) ?? ["?"])
    }

    private struct Layout {
        var name: String
        var links: [Link]
        var egress: [AddressFamily: Egress]
    }

    /// Route layouts for a set of present kinds (each kind's link has its own index, deliberately not in kind order).
    /// Distractors are always there and are never usable: a loopback with the best default route, admin-down links
    /// with good routes (the kernel drops those), links without a route, and links without carrier whose routes are
    /// worse than any present link's (the kernel picks them only when nothing else has a route).
    private func layouts(_ present: [LinkKind], hotspot: Bool) -> [Layout] {
        layouts(present).map { l in
            var l = l
            // The Wi-Fi links are a phone's hotspot: metered.
            if hotspot { l.links = l.links.map { var k = $0; if k.kind == .wifi { k.metered = true }; return k } }
            return l
        }
    }

    private func layouts(_ present: [LinkKind]) -> [Layout] {
        var distractors: [Link] = [makeLink(1, "lo", .loopback, metric: 0)]
        for (i, k) in Self.kinds.enumerated() {
            distractors.append(makeLink(Int32(40 + i), "down-\(k)", k, metric: 5000, carrier: false))
            distractors.append(makeLink(Int32(50 + i), "admindown-\(k)", k, metric: 1, up: false))
            distractors.append(makeLink(Int32(60 + i), "noroute-\(k)", k, metric: nil))
        }
        let index: [LinkKind: Int32] = [.wifi: 9, .wwan: 5, .ethernet: 7, .other: 3]
        let typical: [LinkKind: UInt32] = [.wifi: 600, .wwan: 700, .ethernet: 100, .other: 300]
        let reversed: [LinkKind: UInt32] = [.wifi: 20, .wwan: 10, .ethernet: 40, .other: 30]
        func one(_ metrics: [LinkKind: UInt32], v4: Bool = true, v6: Bool = false) -> [Link] {
            present.map { k in
                var l = makeLink(index[k]!, "\(k)0", k, metric: metrics[k]!)
                l.defaultRoute.ipv4 = v4
                l.defaultRoute.ipv6 = v6
                return l
            }
        }
        func noCarrier(_ l: Link) -> Link {
            var l = l
            l.status.carrier = false
            l.status.operstate = "down"
            return l
        }
        // The present kinds, best typical metric first.
        let byMetric = present.sorted { typical[$0]! < typical[$1]! }
        /// As the kernel routes with all default routes in one table and no rules, then changed by `adjust` (rules
        /// and route types).
        func layout(_ name: String, _ links: [Link],
                    _ adjust: (inout [AddressFamily: Egress]) -> Void = { _ in }) -> Layout {
            let all = distractors + links
            var egress = simpleEgress(all)
            adjust(&egress)
            return Layout(name: name, links: all, egress: egress)
        }
        let tied = present.map { makeLink(index[$0]!, "\($0)0", $0, metric: 100) }
        // Two links per kind; the second of each kind (higher index) has the lower metric.
        let two = present.flatMap { k in
            [makeLink(index[k]!, "\(k)0", k, metric: typical[k]! + 5),
             makeLink(index[k]! + 10, "\(k)1", k, metric: typical[k]!)]
        }
        return [
            layout("typical", one(typical)),
            layout("reversed", one(reversed)),
            layout("tied", tied),
            layout("two-per-kind", two),
            // The best link lost its carrier: the kernel still sends IPv4 there (linkdown), into nothing.
            layout("best-lost-carrier", one(typical).map { $0.kind == byMetric.first ? noCarrier($0) : $0 }),
            // A carrier-less Ethernet port whose route beats every present link's.
            layout("dead-port-first", one(typical) + [makeLink(30, "eth-dead", .ethernet, metric: 1, carrier: false)]),
            // IPv4 by the best link, IPv6 by the worst (the only one with an IPv6 route): one link for both when
            // only one kind is present.
            layout("split-families", one(typical).map { l in
                var l = l
                l.defaultRoute.ipv6 = l.kind == byMetric.last
                return l
            }),
            // IPv6 only: IPv4 has no route at all (the distractors' IPv4 routes are in a table no rule consults).
            layout("ipv6-only", one(typical, v4: false, v6: true)) { $0[.ipv4] = nil },
            // IPv6 by the best link; IPv4's only routes are the carrier-less distractors': into nothing.
            layout("ipv4-dead-ipv6-works", one(typical, v4: false, v6: true)),
            // Dual stack by the best link, but IPv4 falls into a blackhole route first.
            layout("blackhole-ipv4", one(typical, v4: true, v6: true)) { $0[.ipv4] = .blocked(.blackhole) },
            // IPv4 by the best link; IPv6 unreachable (its routes are on links without an IPv6 route here).
            layout("unreachable-ipv6", one(typical)) { $0[.ipv6] = .blocked(.unreachable) },
            // No route at all for either family (a socket bound to a link still gets out).
            layout("no-route", one(typical)) { $0 = [:] },
            // Policy routing sends both families by the worst link, whatever the metrics say.
            layout("rules-pick-worst", one(typical)) { e in
                if let worst = byMetric.last { e = [.ipv4: .link(index[worst]!), .ipv6: .link(index[worst]!)] }
            },
        ]
    }

    func testVerdictTable() {
        var checked = 0
        var reasons: [String: Int] = [:]
        /// Rows showing the new rules at work, so that the layouts are known to reach them.
        var seen: [String: Int] = [:]
        var encoded: Set<JSONKey> = []
        for mask in 0..<16 {
            let present = Self.kinds.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
          // Metered= and whether the Wi-Fi is metered (a hotspot); not-ready rows once per permission set.
          for (metered, hotspot) in [(Permission.allow, false), (.allow, true), (.deny, false), (.deny, true),
                                     (.ask, false), (.ask, true)] {
            let all = layouts(present, hotspot: hotspot)
            XCTAssertEqual(all.count, 13)
            for layout in all {
                let network = NetworkState(links: layout.links, egress: layout.egress)
                for var p in allPermissionSets {
                    p.metered = metered
                    for ready in metered == .allow && !hotspot ? [true, false] : [true] {
                        let v = Verdict.compute(app: "a", matchedBy: .unit, permissions: p, network: network,
                                                ready: ready)
                        let want = oracle(layout.links, layout.egress, p, ready: ready)
                        // Described only for a failure: `\(p)` is reflection, and this runs 100,000 times.
                        func label() -> String { "kinds \(present.map(\.rawValue)) \(layout.name) \(p) ready \(ready)" }
                        XCTAssertEqual(actual(v), want, label())
                        XCTAssertEqual(v.app, "a")
                        XCTAssertEqual(v.matchedBy, .unit)
                        XCTAssertEqual(v.permissions, p)
                        checked += 1
                        reasons[want.reason, default: 0] += 1
                        let linkEgress = want.egress.compactMap { $0 }.filter { !$0.hasPrefix("blocked") }
                        if want.reason == "routed-elsewhere", let bind = want.bindTo,
                           !want.egress.contains(where: { $0?.hasPrefix(bind + " ") == true }) {
                            seen["routed-elsewhere, bind_to not an egress link", default: 0] += 1
                        }
                        if want.reason == "routed-elsewhere", want.egress.contains(where: { $0?.hasSuffix(" usable allowed") == true }) {
                            seen["not ok: one family works, the other leaks", default: 0] += 1
                        }
                        if want.reason == "routed-elsewhere", !linkEgress.isEmpty,
                           linkEgress.allSatisfy({ $0.contains(" unusable ") }) {
                            seen["routed-elsewhere: traffic into a link without carrier", default: 0] += 1
                        }
                        if want.reason == "ok", want.egress.contains(where: { $0?.hasPrefix("blocked") == true }) {
                            seen["ok with the other family blocked", default: 0] += 1
                        }
                        if want.reason == "ok", want.egress[0] == nil {
                            seen["ok via IPv6's link", default: 0] += 1
                        }
                        if want.reason == "ok", want.egress.contains(where: { $0?.contains(" unusable ") == true }) {
                            seen["ok while the other family goes into a dead link", default: 0] += 1
                        }
                        if want.reason == "denied" || want.reason == "awaiting-decision",
                           want.egress.contains(where: { $0?.hasSuffix(" usable not-allowed") == true }) {
                            seen["\(want.reason) with traffic leaking", default: 0] += 1
                        }
                        if want.reason == "denied", want.denied == ["metered"] {
                            seen["denied by Metered= alone", default: 0] += 1
                        }
                        if want.reason == "awaiting-decision", want.pending == ["metered"] {
                            seen["awaiting a decision on metered alone", default: 0] += 1
                        }
                        if want.reason == "denied", p.wifi == .ask, hotspot, metered == .deny, present == [.wifi] {
                            seen["an ask kept off by Metered=deny is not pending", default: 0] += 1
                        }
                        if want.reason == "routed-elsewhere", hotspot, metered != .allow, want.bindTo?.contains(" wifi ") == false,
                           want.egress.contains(where: { $0?.contains(" wifi metered usable not-allowed") == true }) {
                            seen["routed by a hotspot Metered= keeps it off", default: 0] += 1
                        }
                        // The JSON is a function of the verdict: read back once per outcome and Metered= (the written
                        // and parsed JSON of each of 100,000 rows was half of this test's 38 s).
                        guard encoded.insert(JSONKey(want: want, metered: p.metered, hotspot: hotspot)).inserted else { continue }
                        let json = v.json
                        XCTAssertEqual(fromJSON(json), want, label())
                        XCTAssertEqual(json.keys, ["app", "matched_by", "available", "reason", "via", "egress",
                                                   "bind_to", "denied_kinds", "pending_kinds", "permissions",
                                                   "sources", "enforced", "enforced_why", "message"], label())
                        XCTAssertEqual(json["permissions"], .object([
                            ("wifi", .string(p.wifi.rawValue)), ("wwan", .string(p.wwan.rawValue)),
                            ("ethernet", .string(p.ethernet.rawValue)), ("other", .string(p.other.rawValue)),
                            ("metered", .string(p.metered.rawValue)), ("roaming", "allow"),
                        ]), label())
                        // makeLink meters exactly the cellular links, and the Wi-Fi ones in hotspot rows.
                        for member in ["via", "bind_to"] {
                            if let kind = json[member]?["kind"]?.stringValue {
                                XCTAssertEqual(json[member]?["metered"]?.boolValue,
                                               kind == "wwan" || (hotspot && kind == "wifi"), label())
                            }
                        }
                    }
                }
            }
          }
        }
        XCTAssertEqual(checked, 16 * 13 * 81 * (6 + 1))
        // The table reaches every reason, and each new rule, so the oracle is not vacuous.
        XCTAssertEqual(Set(reasons.keys), ["ok", "denied", "awaiting-decision", "no-network", "routed-elsewhere",
                                           "starting"])
        XCTAssertEqual(Set(seen.keys), [
            "routed-elsewhere, bind_to not an egress link",
            "not ok: one family works, the other leaks",
            "routed-elsewhere: traffic into a link without carrier",
            "ok with the other family blocked",
            "ok via IPv6's link",
            "ok while the other family goes into a dead link",
            "denied with traffic leaking",
            "awaiting-decision with traffic leaking",
            "denied by Metered= alone",
            "awaiting a decision on metered alone",
            "an ask kept off by Metered=deny is not pending",
            "routed by a hotspot Metered= keeps it off",
        ], "\(seen)")
    }

    /// A few rows spelled out, so a shared mistake in the oracle and the code would still show. The kernel sends
    /// traffic by wwan0 (the lowest metric).
    func testSpelledOutRows() {
        let network = NetworkState(routedLinks: [makeLink(1, "lo", .loopback, metric: nil),
                                                 makeLink(2, "eth0", .ethernet, metric: 100),
                                                 makeLink(3, "wlan0", .wifi, metric: 600),
                                                 makeLink(4, "wwan0", .wwan, metric: 50)])
        func v(_ wifi: Permission, _ wwan: Permission, _ eth: Permission, network n: NetworkState? = nil) -> Verdict {
            Verdict.compute(app: "x", matchedBy: .name, network: n ?? network, wifi, wwan, eth)
        }
        func egress(_ allowed: Bool) -> JSON {
            .object([("ipv4", .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null),
                                       ("usable", true), ("allowed", .bool(allowed))])), ("ipv6", .null)])
        }
        let all = v(.allow, .allow, .allow)
        XCTAssertTrue(all.available)
        XCTAssertEqual(all.reason, .ok)
        XCTAssertEqual(all.via?.name, "wwan0")
        XCTAssertEqual(all.json["via"], .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", true), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(all.json["egress"], egress(true))
        XCTAssertEqual(all.json["bind_to"], .null)

        // Allowed on Ethernet and Wi-Fi, but the kernel sends its traffic by cellular: bind to eth0 (metric 100,
        // better than wlan0's 600).
        let noWWAN = v(.allow, .deny, .allow)
        XCTAssertFalse(noWWAN.available)
        XCTAssertEqual(noWWAN.reason, .routedElsewhere)
        XCTAssertNil(noWWAN.via)
        XCTAssertEqual(noWWAN.bindTo?.name, "eth0")
        XCTAssertEqual(noWWAN.json["reason"], "routed-elsewhere")
        XCTAssertEqual(noWWAN.json["via"], .null)
        XCTAssertEqual(noWWAN.json["bind_to"],
                       .object([("index", 2), ("name", "eth0"), ("kind", "ethernet"), ("metered", false), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(noWWAN.json["egress"], egress(false))
        XCTAssertEqual(noWWAN.kinds.denied, [.wwan])
        XCTAssertEqual(noWWAN.kinds.pending, [])

        let wifiOnly = v(.allow, .deny, .deny)
        XCTAssertEqual(wifiOnly.reason, .routedElsewhere)
        XCTAssertEqual(wifiOnly.bindTo?.name, "wlan0")
        XCTAssertEqual(wifiOnly.kinds.denied, [.wwan, .ethernet])

        // With cellular's route worse than Ethernet's, the kernel sends traffic by eth0: available via Ethernet,
        // still listing wwan as denied.
        let ethFirst = NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet, metric: 100),
                                                  makeLink(3, "wlan0", .wifi, metric: 600),
                                                  makeLink(4, "wwan0", .wwan, metric: 700)])
        let viaEth = v(.allow, .deny, .allow, network: ethFirst)
        XCTAssertTrue(viaEth.available)
        XCTAssertEqual(viaEth.reason, .ok)
        XCTAssertEqual(viaEth.json["via"], .object([("index", 2), ("name", "eth0"), ("kind", "ethernet"),
                                                    ("metered", false), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(viaEth.json["bind_to"], .null)
        XCTAssertEqual(viaEth.kinds.denied, [.wwan])

        let ask = v(.deny, .ask, .deny)
        XCTAssertFalse(ask.available)
        XCTAssertEqual(ask.reason, .awaitingDecision)
        XCTAssertNil(ask.via)
        XCTAssertNil(ask.bindTo)
        XCTAssertEqual(ask.kinds.denied, [.wifi, .ethernet])
        XCTAssertEqual(ask.kinds.pending, [.wwan])
        XCTAssertEqual(ask.json["reason"], "awaiting-decision")
        XCTAssertEqual(ask.json["egress"], egress(false), "ask undecided is not allowed")

        let none = v(.deny, .deny, .deny)
        XCTAssertEqual(none.reason, .denied)
        XCTAssertEqual(none.kinds.denied, [.wifi, .wwan, .ethernet])
        XCTAssertEqual(none.json["available"], false)
        XCTAssertEqual(none.json["bind_to"], .null)
    }

    /// The kernel's choice, not the metrics, decides: IPv4 and IPv6 on different links, a blackhole, a dead link.
    func testSpelledOutRoutes() {
        let eth = makeLink(2, "eth0", .ethernet, metric: 100)
        var wwan = makeLink(4, "wwan0", .wwan, metric: 700)
        wwan.defaultRoute.ipv4 = false
        wwan.defaultRoute.ipv6 = true
        let links = [eth, makeLink(3, "wlan0", .wifi, metric: 600), wwan]
        func v(_ egress: [AddressFamily: Egress], _ wifi: Permission, _ wwan: Permission, _ eth: Permission,
               links l: [Link]? = nil) -> Verdict {
            Verdict.compute(app: "x", matchedBy: .name, network: NetworkState(links: l ?? links, egress: egress),
                            wifi, wwan, eth)
        }
        let split: [AddressFamily: Egress] = [.ipv4: .link(2), .ipv6: .link(4)]
        // IPv4 works by Ethernet, but IPv6 would leave by cellular: not ok, bind to eth0.
        let leaky = v(split, .allow, .deny, .allow)
        XCTAssertEqual(leaky.reason, .routedElsewhere)
        XCTAssertFalse(leaky.available)
        XCTAssertNil(leaky.via)
        XCTAssertEqual(leaky.bindTo?.name, "eth0")
        XCTAssertEqual(leaky.json["egress"]?["ipv4"]?["allowed"], true)
        XCTAssertEqual(leaky.json["egress"]?["ipv6"], .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"),
                                                               ("metered", true), ("roaming", false), ("over", .null), ("usable", true),
                                                               ("allowed", false)]))
        // Allowed on both: ok, via IPv4's link.
        let both = v(split, .allow, .allow, .allow)
        XCTAssertEqual(both.reason, .ok)
        XCTAssertEqual(both.via?.name, "eth0")
        // Cellular only: IPv6 works, IPv4 leaks by Ethernet; with no allowed link but wwan0, which is usable,
        // the app could bind to it.
        let cellular = v(split, .deny, .allow, .deny)
        XCTAssertEqual(cellular.reason, .routedElsewhere)
        XCTAssertEqual(cellular.bindTo?.name, "wwan0")
        // IPv4 into a blackhole, IPv6 by cellular: ok via IPv6's link for an app allowed there.
        let blackhole = v([.ipv4: .blocked(.blackhole), .ipv6: .link(4)], .deny, .allow, .deny)
        XCTAssertEqual(blackhole.reason, .ok)
        XCTAssertEqual(blackhole.via?.name, "wwan0")
        XCTAssertEqual(blackhole.json["egress"]?["ipv4"], .object([("blocked", "blackhole")]))
        // ... and routed-elsewhere for an app allowed only on Ethernet: nothing it may use gets its traffic.
        let ethOnly = v([.ipv4: .blocked(.blackhole), .ipv6: .link(4)], .deny, .deny, .allow)
        XCTAssertEqual(ethOnly.reason, .routedElsewhere)
        XCTAssertEqual(ethOnly.bindTo?.name, "eth0")
        // Both families blocked: nothing works, nothing leaks; an allowed usable link is the way out.
        let prohibited = v([.ipv4: .blocked(.prohibit), .ipv6: .blocked(.unreachable)], .allow, .allow, .allow)
        XCTAssertEqual(prohibited.reason, .routedElsewhere)
        XCTAssertEqual(prohibited.bindTo?.name, "eth0")
        XCTAssertEqual(prohibited.json["egress"], .object([("ipv4", .object([("blocked", "prohibit")])),
                                                           ("ipv6", .object([("blocked", "unreachable")]))]))
        // No route at all: the same.
        XCTAssertEqual(v([:], .allow, .allow, .allow).reason, .routedElsewhere)
        XCTAssertEqual(v([:], .allow, .allow, .allow).json["egress"], .object([("ipv4", .null), ("ipv6", .null)]))

        // Ethernet lost its carrier but keeps the lowest metric: the kernel still sends IPv4 there.
        var deadEth = eth
        deadEth.status.carrier = false
        let dead = NetworkState(routedLinks: [deadEth, makeLink(3, "wlan0", .wifi, metric: 600)])
        XCTAssertEqual(dead.egress, [.ipv4: .link(2)])
        let intoNothing = Verdict.compute(app: "x", matchedBy: .name, network: dead, .allow, .allow, .allow)
        XCTAssertEqual(intoNothing.reason, .routedElsewhere)
        XCTAssertEqual(intoNothing.bindTo?.name, "wlan0")
        XCTAssertEqual(intoNothing.json["egress"]?["ipv4"], .object([("index", 2), ("name", "eth0"),
                                                                     ("kind", "ethernet"), ("metered", false), ("roaming", false), ("over", .null),
                                                                     ("usable", false), ("allowed", true)]))
        // A dead link neither works nor leaks: denied, not routed-elsewhere, when Wi-Fi is not allowed; and no
        // network when nothing else is usable, whatever the permissions.
        XCTAssertEqual(Verdict.compute(app: "x", matchedBy: .name, network: dead, .deny, .allow, .deny).reason,
                       .denied)
        XCTAssertEqual(Verdict.compute(app: "x", matchedBy: .name, network: NetworkState(routedLinks: [deadEth]),
                                       .allow, .allow, .allow).reason, .noNetwork)
    }

    func testLoopbackOnlyIsNoNetwork() {
        let network = NetworkState(routedLinks: [makeLink(1, "lo", .loopback, metric: 0)])
        for p in allPermissionSets {
            let v = Verdict.compute(app: "a", matchedBy: .name, permissions: p, network: network, ready: true)
            XCTAssertEqual(v.reason, .noNetwork)
            XCTAssertFalse(v.available)
            XCTAssertNil(v.via)
            XCTAssertNil(v.bindTo)
            XCTAssertEqual(v.kinds.denied, [])
            XCTAssertEqual(v.kinds.pending, [])
        }
        XCTAssertEqual(Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: NetworkState(),
                                       ready: true).json["reason"], "no-network")
    }

    /// Loopback is never a way out, even when the kernel's lookup answers `dev lo` (a default route through it):
    /// traffic there goes nowhere, as into a link without carrier.
    func testEgressThroughLoopbackIsNoWayOut() {
        let lo = makeLink(1, "lo", .loopback, metric: 0)
        let alone = NetworkState(links: [lo], egress: [.ipv4: .link(1)])
        XCTAssertFalse(alone.available)
        for p in allPermissionSets {
            let v = Verdict.compute(app: "a", matchedBy: .name, permissions: p, network: alone, ready: true)
            XCTAssertEqual(v.reason, .noNetwork, "\(p)")
            XCTAssertFalse(v.available, "\(p)")
            XCTAssertNil(v.via, "\(p)")
        }
        let withEth = NetworkState(links: [lo, makeLink(2, "eth0", .ethernet)], egress: [.ipv4: .link(1)])
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: withEth, ready: true)
        XCTAssertEqual(v.reason, .routedElsewhere)
        XCTAssertEqual(v.bindTo?.name, "eth0")
    }

    /// Doubtful: an egress whose ifindex is not among the links (a link that went between two dumps) is reported
    /// as no route (null), while STATUS shows it as `{"index":N}`.
    func testEgressToAnUnknownLinkIsReportedAsNoRoute() {
        let network = NetworkState(links: [makeLink(2, "eth0", .ethernet)], egress: [.ipv4: .link(9)])
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: network, ready: true)
        XCTAssertNil(v.egress[.ipv4])
        XCTAssertEqual(v.json["egress"], .object([("ipv4", .null), ("ipv6", .null)]))
        XCTAssertEqual(v.reason, .routedElsewhere)
        XCTAssertEqual(v.bindTo?.name, "eth0")
    }

    /// Not ready means "don't know yet", even with a perfectly good link: nothing about routes either.
    func testStartingRegardlessOfLinks() {
        let network = NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)])
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: network, ready: false)
        XCTAssertEqual(v.reason, .starting)
        XCTAssertFalse(v.available)
        XCTAssertEqual(v.egress, [:])
        XCTAssertNil(v.bindTo)
        XCTAssertEqual(v.json["reason"], "starting")
        XCTAssertEqual(v.json["via"], .null)
        XCTAssertEqual(v.json["egress"], .object([("ipv4", .null), ("ipv6", .null)]))
        XCTAssertEqual(v.json["bind_to"], .null)
    }

    /// Metered comes from the link (a tethered phone can be metered Wi-Fi; an unmetered modem is possible too), in
    /// via, egress and bind_to alike.
    func testMeteredFollowsTheLink() {
        let wwanFirst = NetworkState(routedLinks: [makeLink(3, "wlan0", .wifi, metered: true),
                                                  makeLink(4, "wwan0", .wwan, metric: 10, metered: false)])
        let allow = PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow)
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: allow, network: wwanFirst, ready: true)
        XCTAssertEqual(v.json["via"], .object([("index", 4), ("name", "wwan0"), ("kind", "wwan"), ("metered", false), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(v.json["egress"]?["ipv4"]?["metered"], false)
        var wifiOnly = allow
        wifiOnly.wwan = .deny
        let w = Verdict.compute(app: "a", matchedBy: .name, permissions: wifiOnly, network: wwanFirst, ready: true)
        XCTAssertEqual(w.reason, .routedElsewhere)
        XCTAssertEqual(w.json["bind_to"], .object([("index", 3), ("name", "wlan0"), ("kind", "wifi"),
                                                   ("metered", true), ("roaming", false), ("over", .null)]))
        let wifiFirst = NetworkState(routedLinks: [makeLink(3, "wlan0", .wifi, metric: 5, metered: true),
                                                  makeLink(4, "wwan0", .wwan, metric: 10, metered: false)])
        let f = Verdict.compute(app: "a", matchedBy: .name, permissions: wifiOnly, network: wifiFirst, ready: true)
        XCTAssertEqual(f.json["via"], .object([("index", 3), ("name", "wlan0"), ("kind", "wifi"), ("metered", true), ("roaming", false), ("over", .null)]))
        XCTAssertEqual(f.json["egress"]?["ipv4"]?["metered"], true)
    }

    func testJSONKeyOrder() {
        let v = Verdict.compute(app: "a", matchedBy: .executable, permissions: .builtIn,
                                network: NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)]), ready: true)
        guard case let .object(members) = v.json else { return XCTFail("not an object") }
        XCTAssertEqual(members.map(\.0), ["app", "matched_by", "available", "reason", "via", "egress", "bind_to",
                                          "denied_kinds", "pending_kinds", "permissions", "sources", "enforced", "enforced_why", "message"])
        XCTAssertEqual(v.json["matched_by"], "executable")
        XCTAssertEqual(v.json["via"]?.keys, ["index", "name", "kind", "metered", "roaming", "over"])
        XCTAssertEqual(v.json["egress"]?.keys, ["ipv4", "ipv6"])
        XCTAssertEqual(v.json["egress"]?["ipv4"]?.keys, ["index", "name", "kind", "metered", "roaming", "over", "usable", "allowed"])
        let elsewhere = Verdict.compute(
            app: "a", matchedBy: .executable, permissions: .builtIn,
            network: NetworkState(links: [makeLink(2, "eth0", .ethernet)], egress: [.ipv6: .blocked(.blackhole)]),
            ready: true)
        XCTAssertEqual(elsewhere.json["bind_to"]?.keys, ["index", "name", "kind", "metered", "roaming", "over"])
        XCTAssertEqual(elsewhere.json["egress"]?.keys, ["ipv4", "ipv6"])
        XCTAssertEqual(elsewhere.json["egress"]?["ipv6"]?.keys, ["blocked"])
    }
}

private extension Verdict {
    static func compute(app: String, matchedBy: MatchedBy, network: NetworkState,
                        _ wifi: Permission, _ wwan: Permission, _ eth: Permission) -> Verdict {
        compute(app: app, matchedBy: matchedBy,
                permissions: PermissionSet(wifi: wifi, wwan: wwan, ethernet: eth, other: .allow),
                network: network, ready: true)
    }
}
