import NetpermCore
import XCTest

/// The verdict for every combination of usable link kinds and permissions, against an oracle written from the
/// rules rather than from the code:
/// - not ready: `starting`, nothing else reported;
/// - no usable non-loopback link: `no-network`;
/// - some usable link allowed: `ok` via the allowed link with the lowest metric (tie: lowest index);
/// - otherwise `awaiting-decision` if some usable link's kind is `ask`, else `denied`;
/// - denied_kinds / pending_kinds: kinds of usable links set to deny / ask, in the order wifi, wwan, ethernet, other.
final class VerdictTests: XCTestCase {
    private static let kinds: [LinkKind] = [.wifi, .wwan, .ethernet, .other]

    private struct Expected: Equatable {
        var available: Bool
        var reason: String
        var via: String?
        var denied: [String]
        var pending: [String]
    }

    private func oracle(_ links: [Link], _ p: PermissionSet, ready: Bool) -> Expected {
        if !ready { return Expected(available: false, reason: "starting", via: nil, denied: [], pending: []) }
        let usable = links.filter { $0.adminUp && $0.carrier && $0.metric != nil && $0.kind != .loopback }
        if usable.isEmpty { return Expected(available: false, reason: "no-network", via: nil, denied: [], pending: []) }
        func perm(_ k: LinkKind) -> Permission {
            switch k {
            case .wifi: return p.wifi
            case .wwan: return p.wwan
            case .ethernet: return p.ethernet
            case .other: return p.other
            case .loopback: return .allow
            }
        }
        let allowed = usable.filter { perm($0.kind) == .allow }
        var best: Link?
        for l in allowed {
            guard let b = best else { best = l; continue }
            if l.metric! < b.metric! || (l.metric! == b.metric! && l.index < b.index) { best = l }
        }
        let denied = Self.kinds.filter { k in usable.contains { $0.kind == k } && perm(k) == .deny }
        let pending = Self.kinds.filter { k in usable.contains { $0.kind == k } && perm(k) == .ask }
        let reason = best != nil ? "ok" : (pending.isEmpty ? "denied" : "awaiting-decision")
        return Expected(available: best != nil, reason: reason, via: best?.name,
                        denied: denied.map(\.rawValue), pending: pending.map(\.rawValue))
    }

    private func actual(_ v: Verdict) -> Expected {
        Expected(available: v.available, reason: v.reason.rawValue, via: v.via?.name,
                 denied: v.deniedKinds.map(\.rawValue), pending: v.pendingKinds.map(\.rawValue))
    }

    /// What the JSON says must be the same as the struct.
    private func fromJSON(_ j: JSON) -> Expected {
        Expected(available: j["available"]?.boolValue ?? false, reason: j["reason"]?.stringValue ?? "?",
                 via: j["via"]?["name"]?.stringValue,
                 denied: j["denied_kinds"]?.arrayValue?.compactMap(\.stringValue) ?? ["?"],
                 pending: j["pending_kinds"]?.arrayValue?.compactMap(\.stringValue) ?? ["?"])
    }

    /// Link layouts for a set of present kinds. Unusable links of every kind, and a loopback with the best
    /// default route, are always there and must never count.
    private func layouts(_ present: [LinkKind]) -> [(String, [Link])] {
        var distractors: [Link] = [makeLink(1, "lo", .loopback, metric: 0)]
        for (i, k) in Self.kinds.enumerated() {
            distractors.append(makeLink(Int32(40 + i), "down-\(k)", k, metric: 1, carrier: false))
            distractors.append(makeLink(Int32(50 + i), "admindown-\(k)", k, metric: 1, up: false))
            distractors.append(makeLink(Int32(60 + i), "noroute-\(k)", k, metric: nil))
        }
        // Indexes deliberately not in kind order.
        let index: [LinkKind: Int32] = [.wifi: 9, .wwan: 5, .ethernet: 7, .other: 3]
        let typical: [LinkKind: UInt32] = [.wifi: 600, .wwan: 700, .ethernet: 100, .other: 300]
        let reversed: [LinkKind: UInt32] = [.wifi: 20, .wwan: 10, .ethernet: 40, .other: 30]
        func one(_ metrics: [LinkKind: UInt32]) -> [Link] {
            present.map { makeLink(index[$0]!, "\($0)0", $0, metric: metrics[$0]!) }
        }
        let tied = present.map { makeLink(index[$0]!, "\($0)0", $0, metric: 100) }
        // Two links per kind; the second of each kind (higher index) has the lower metric.
        let two = present.flatMap { k in
            [makeLink(index[k]!, "\(k)0", k, metric: typical[k]! + 5),
             makeLink(index[k]! + 10, "\(k)1", k, metric: typical[k]!)]
        }
        return [("typical", one(typical)), ("reversed", one(reversed)), ("tied", tied), ("two-per-kind", two)]
            .map { ($0.0, distractors + $0.1) }
    }

    func testVerdictTable() {
        var checked = 0
        var reasons: [String: Int] = [:]
        for mask in 0..<16 {
            let present = Self.kinds.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
            for (layout, links) in layouts(present) {
                let network = NetworkState(routedLinks: links)
                for p in allPermissionSets {
                    for ready in [true, false] {
                        let v = Verdict.compute(app: "a", matchedBy: .unit, permissions: p, network: network,
                                                ready: ready)
                        let want = oracle(links, p, ready: ready)
                        let label = "kinds \(present.map(\.rawValue)) \(layout) \(p) ready \(ready)"
                        XCTAssertEqual(actual(v), want, label)
                        XCTAssertEqual(fromJSON(v.json), want, label)
                        XCTAssertEqual(v.app, "a")
                        XCTAssertEqual(v.matchedBy, .unit)
                        XCTAssertEqual(v.permissions, p)
                        XCTAssertEqual(v.json["permissions"], .object([
                            ("wifi", .string(p.wifi.rawValue)), ("wwan", .string(p.wwan.rawValue)),
                            ("ethernet", .string(p.ethernet.rawValue)), ("other", .string(p.other.rawValue)),
                        ]), label)
                        if let via = v.via {
                            XCTAssertEqual(v.json["via"]?["kind"]?.stringValue, via.kind.rawValue, label)
                            XCTAssertEqual(v.json["via"]?["metered"]?.boolValue, via.kind == .wwan, label)
                        } else {
                            XCTAssertEqual(v.json["via"], .null, label)
                        }
                        checked += 1
                        reasons[want.reason, default: 0] += 1
                    }
                }
            }
        }
        XCTAssertEqual(checked, 16 * 4 * 81 * 2)
        // The table reaches every reason, so the oracle is not vacuous.
        XCTAssertEqual(Set(reasons.keys), ["ok", "denied", "awaiting-decision", "no-network", "starting"])
    }

    /// A few rows spelled out, so a shared mistake in the oracle and the code would still show.
    func testSpelledOutRows() {
        let network = NetworkState(routedLinks: [makeLink(1, "lo", .loopback, metric: nil),
                                           makeLink(2, "eth0", .ethernet, metric: 100),
                                           makeLink(3, "wlan0", .wifi, metric: 600),
                                           makeLink(4, "wwan0", .wwan, metric: 50)])
        func v(_ wifi: Permission, _ wwan: Permission, _ eth: Permission) -> Verdict {
            Verdict.compute(app: "x", matchedBy: .name, network: network, wifi, wwan, eth)
        }
        let all = v(.allow, .allow, .allow)
        XCTAssertTrue(all.available)
        XCTAssertEqual(all.reason, .ok)
        XCTAssertEqual(all.via?.name, "wwan0")
        XCTAssertEqual(all.json["via"], .object([("name", "wwan0"), ("kind", "wwan"), ("metered", true)]))

        let noWWAN = v(.allow, .deny, .allow)
        XCTAssertEqual(noWWAN.via?.name, "eth0")
        XCTAssertEqual(noWWAN.json["via"], .object([("name", "eth0"), ("kind", "ethernet"), ("metered", false)]))
        XCTAssertEqual(noWWAN.deniedKinds, [.wwan])
        XCTAssertEqual(noWWAN.pendingKinds, [])

        let ask = v(.deny, .ask, .deny)
        XCTAssertFalse(ask.available)
        XCTAssertEqual(ask.reason, .awaitingDecision)
        XCTAssertNil(ask.via)
        XCTAssertEqual(ask.deniedKinds, [.wifi, .ethernet])
        XCTAssertEqual(ask.pendingKinds, [.wwan])
        XCTAssertEqual(ask.json["reason"], "awaiting-decision")

        let none = v(.deny, .deny, .deny)
        XCTAssertEqual(none.reason, .denied)
        XCTAssertEqual(none.deniedKinds, [.wifi, .wwan, .ethernet])
        XCTAssertEqual(none.json["available"], false)
    }

    func testLoopbackOnlyIsNoNetwork() {
        let network = NetworkState(routedLinks: [makeLink(1, "lo", .loopback, metric: 0)])
        for p in allPermissionSets {
            let v = Verdict.compute(app: "a", matchedBy: .name, permissions: p, network: network, ready: true)
            XCTAssertEqual(v.reason, .noNetwork)
            XCTAssertFalse(v.available)
            XCTAssertNil(v.via)
            XCTAssertEqual(v.deniedKinds, [])
            XCTAssertEqual(v.pendingKinds, [])
        }
        XCTAssertEqual(Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: NetworkState(),
                                       ready: true).json["reason"], "no-network")
    }

    /// Not ready means "don't know yet", even with a perfectly good link.
    func testStartingRegardlessOfLinks() {
        let network = NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)])
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: .builtIn, network: network, ready: false)
        XCTAssertEqual(v.reason, .starting)
        XCTAssertFalse(v.available)
        XCTAssertEqual(v.json["reason"], "starting")
        XCTAssertEqual(v.json["via"], .null)
    }

    /// Metered comes from the link (a tethered phone can be metered Wi-Fi; an unmetered modem is possible too).
    func testMeteredFollowsTheLink() {
        let network = NetworkState(routedLinks: [makeLink(3, "wlan0", .wifi, metered: true),
                                           makeLink(4, "wwan0", .wwan, metric: 10, metered: false)])
        let allow = PermissionSet(wifi: .allow, wwan: .allow, ethernet: .allow, other: .allow)
        let v = Verdict.compute(app: "a", matchedBy: .name, permissions: allow, network: network, ready: true)
        XCTAssertEqual(v.json["via"], .object([("name", "wwan0"), ("kind", "wwan"), ("metered", false)]))
        var wifiOnly = allow
        wifiOnly.wwan = .deny
        let w = Verdict.compute(app: "a", matchedBy: .name, permissions: wifiOnly, network: network, ready: true)
        XCTAssertEqual(w.json["via"], .object([("name", "wlan0"), ("kind", "wifi"), ("metered", true)]))
    }

    func testJSONKeyOrder() {
        let v = Verdict.compute(app: "a", matchedBy: .executable, permissions: .builtIn,
                                network: NetworkState(routedLinks: [makeLink(2, "eth0", .ethernet)]), ready: true)
        guard case let .object(members) = v.json else { return XCTFail("not an object") }
        XCTAssertEqual(members.map(\.0), ["app", "matched_by", "available", "reason", "via", "denied_kinds",
                                          "pending_kinds", "permissions", "sources"])
        XCTAssertEqual(v.json["matched_by"], "executable")
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
