// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// Stacked links and tunnels take the kind of what carries them: the pass after each link's own classification.
///
/// A VLAN or macvlan on wwan0 is cellular, a bridge holding the wired NIC is wired, and a VPN over cellular is
/// cellular (as Apple's `usesInterfaceType` reports the interface under a tunnel): otherwise each would be
/// `other` and unmetered, a way around `WWAN=deny`. What carries a link:
/// - vlan, macvlan, macvtap, ipvlan, ipvtap: its lower link (IFLA_LINK), `classified_by` "lower:eth0";
/// - bond, bridge, team: its ports (links whose IFLA_MASTER is it), the most restrictive of them
///   (`restrictiveness`), metered if any is; "ports:eth0,wlan0";
/// - a tunnel (`tunnelKinds`, unless it is a bridge's port: a VM's tap): the link the kernel routes its remote
///   endpoint by, where the kernel knows the endpoint ("endpoint:eth0"); else the device it is bound to
///   ("lower:eth0"); else, for a userspace VPN (tun), the links of the host routes VPN clients install to their
///   server ("host-route:wwan0"), the most restrictive; else the best usable link that is not a tunnel
///   ("primary:eth0").
/// Carriers are resolved first (a VLAN on a bond of NICs is wired). The kernel allows no cycle, but a picture
/// taken mid-change could show one: the walk stops at a link it reaches again, which counts as its own rules
/// said. An `[Interface]` section setting `Kind=` on the stacked link itself wins over all this, and one setting
/// `Metered=` wins for metered. A link is roaming when a carrier is (a VPN over a roaming modem costs the same), unless
/// `Roaming=` on it says otherwise.
public enum Stacking {
    /// Kinds that sit on one lower link and send by it.
    public static let lowerKinds: Set<String> = ["vlan", "macvlan", "macvtap", "ipvlan", "ipvtap"]
    /// Kinds that aggregate ports.
    public static let portKinds: Set<String> = ["bond", "bridge", "team"]
    /// Layer-3 (and layer-2 over IP) tunnels: their packets are wrapped and leave by another link. `tun` covers
    /// tap devices too (the kernel reports both as kind `tun`).
    public static let tunnelKinds: Set<String> = [
        "tun", "wireguard", "ipip", "gre", "gretap", "ip6gre", "ip6gretap", "sit", "ip6tnl", "vti", "vti6", "xfrm",
        "ovpn", "ovpn-dco", "vxlan", "geneve", "bareudp", "amt", "gtp", "erspan", "ip6erspan", "l2tpeth",
    ]

    /// Higher is more restrictive: cellular costs money and is often capped, Wi-Fi may be a hotspot, wired is
    /// neither, and `other` (a VM's tap, a veth) is what a bridge's guest side adds without changing the uplink.
    public static func restrictiveness(_ kind: LinkKind) -> Int {
        switch kind {
        case .wwan: 4
        case .wifi: 3
        case .ethernet: 2
        case .other: 1
        case .loopback: 0
        }
    }

    /// A tunnel's packets leave by another link. A tap that is a bridge's (or bond's) port is no tunnel: it is a
    /// VM's side of the bridge, and the bridge sends by its other ports.
    public static func isTunnel(_ facts: LinkFacts) -> Bool {
        guard let k = facts.rtnlKind, tunnelKinds.contains(k) else { return false }
        return facts.masterIndex == nil
    }

    /// A tunnel whose carrier is found from host routes or the primary link: the kernel cannot know its endpoint.
    public static func needsHostRoutes(_ facts: LinkFacts) -> Bool {
        isTunnel(facts) && facts.tunnelRemote == nil && facts.lowerIndex == nil
    }

    /// `links` as classified one by one (from `snapshot.links`), with stacked links and tunnels given the kind and
    /// metered flag of what carries them.
    public static func apply(_ links: [Link], snapshot: KernelSnapshot, overrides: [InterfaceOverride]) -> [Link] {
        var resolver = Resolver(links: links, snapshot: snapshot, overrides: overrides)
        return links.map { resolver.resolve($0.index) ?? $0 }
    }

    private struct Resolver {
        var own: [Int32: Link] = [:]
        var facts: [Int32: LinkFacts] = [:]
        var ports: [Int32: [Int32]] = [:]
        let endpoints: [Int32: Egress]
        let hostRouteLinks: [Int32]
        let overrides: [InterfaceOverride]
        var done: [Int32: Link] = [:]
        var visiting: Set<Int32> = []

        init(links: [Link], snapshot: KernelSnapshot, overrides: [InterfaceOverride]) {
            for l in links { own[l.index] = l }
            for f in snapshot.links {
                facts[f.index] = f
                if let m = f.masterIndex, m != f.index { ports[m, default: []].append(f.index) }
            }
            endpoints = snapshot.endpointRoutes
            hostRouteLinks = Array(Set(snapshot.hostRoutes.map(\.index))).sorted()
            self.overrides = overrides
        }

        func isTunnel(_ index: Int32) -> Bool { facts[index].map(Stacking.isTunnel) ?? false }

        /// The link as stacking leaves it; nil for an unknown index.
        mutating func resolve(_ index: Int32) -> Link? {
            if let l = done[index] { return l }
            guard let link = own[index] else { return nil }
            // A cycle (or a link reached again through itself) keeps what its own rules said.
            guard visiting.insert(index).inserted else { return link }
            defer { visiting.remove(index) }
            var result = link
            if let (carriers, by) = carriers(of: index), let taken = take(carriers) {
                var kindSet = false
                var metered: Bool?, roaming: Bool?
                for o in overrides where o.glob.matches(link.name) {
                    if o.kind != nil { kindSet = true }
                    if let m = o.metered { metered = m }
                    if let r = o.roaming { roaming = r }
                }
                if !kindSet {
                    result.kind = taken.kind
                    result.classifiedBy = by(taken)
                    // Metered if any carrier is, with that carrier's provenance; Metered= on this link wins.
                    if let metered {
                        result.metered = metered
                        result.meteredBy = .config
                    } else if let m = taken.metered ? taken : carriers.first(where: \.metered) {
                        result.metered = true
                        result.meteredBy = m.meteredBy
                    } else {
                        result.metered = false
                        result.meteredBy = taken.meteredBy
                    }
                    // Roaming if any carrier is; Roaming= on this link wins, and what is known beats nothing.
                    if let roaming {
                        result.roaming = roaming
                        result.roamingBy = .config
                    } else if let r = carriers.first(where: { $0.roaming == true })
                        ?? (result.roaming == nil ? carriers.first(where: { $0.roaming != nil }) : nil) {
                        result.roaming = r.roaming
                        result.roamingBy = r.roamingBy
                    }
                    result.over = taken.name
                }
            }
            done[index] = result
            return result
        }

        /// The most restrictive of `links` (ties to the lowest index).
        func take(_ links: [Link]) -> Link? {
            links.max { (restrictiveness($0.kind), -$0.index) < (restrictiveness($1.kind), -$1.index) }
        }

        /// What carries the link, resolved, and how `classified_by` names it; nil when nothing does.
        mutating func carriers(of index: Int32) -> ([Link], (Link) -> String)? {
            guard let f = facts[index], let kind = f.rtnlKind else { return nil }
            if lowerKinds.contains(kind) {
                guard let lower = f.lowerIndex, let l = resolveOther(lower, from: index) else { return nil }
                return ([l], { "lower:\($0.name)" })
            }
            if portKinds.contains(kind) {
                // By ifindex, not in the picture's order: the same bond read again must be the same link.
                let found = (ports[index] ?? []).sorted().compactMap { resolveOther($0, from: index) }
                guard !found.isEmpty else { return nil }
                let names = found.map(\.name).joined(separator: ",")
                return (found, { _ in "ports:\(names)" })
            }
            guard Stacking.isTunnel(f) else { return nil }
            if f.tunnelRemote != nil {
                // The kernel knows where the tunnel's packets go; no route to it: nothing carries them.
                guard case let .link(out)? = endpoints[index], let l = resolveOther(out, from: index) else { return nil }
                return ([l], { "endpoint:\($0.name)" })
            }
            if let lower = f.lowerIndex {
                guard let l = resolveOther(lower, from: index) else { return nil }
                return ([l], { "lower:\($0.name)" })
            }
            let viaHostRoutes = hostRouteLinks.filter { !isTunnel($0) }.compactMap { resolveOther($0, from: index) }
                .filter { $0.kind != .loopback }
            if !viaHostRoutes.isEmpty { return (viaHostRoutes, { "host-route:\($0.name)" }) }
            let candidates = own.values.filter { $0.usable && $0.kind != .loopback && !isTunnel($0.index) }
            guard let best = candidates.min(by: { ($0.metric ?? .max, $0.index) < ($1.metric ?? .max, $1.index) }),
                  let l = resolveOther(best.index, from: index) else { return nil }
            return ([l], { "primary:\($0.name)" })
        }

        /// Another link, resolved; nil for itself or an unknown index.
        mutating func resolveOther(_ other: Int32, from index: Int32) -> Link? {
            other == index ? nil : resolve(other)
        }
    }
}
