// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The daemon's picture of the network: every link, classified, with its addresses and default routes.
public struct NetworkState: Equatable, Sendable {
    /// Sorted by index.
    public private(set) var links: [Link]
    /// Where each family's traffic goes (see `Egress`); no entry: no route.
    public private(set) var egress: [AddressFamily: Egress]
    /// Mode=steer: where marked sockets' traffic goes, by mark (`KernelSnapshot.markedEgress`).
    public private(set) var markedEgress: [UInt32: [AddressFamily: Egress]] = [:]

    /// One link per index (the first wins), sorted by index.
    public init(links: [Link] = [], egress: [AddressFamily: Egress] = [:]) {
        var seen: Set<Int32> = []
        self.links = links.filter { seen.insert($0.index).inserted }.sorted { $0.index < $1.index }
        self.egress = egress
    }

    /// Joins the kernel's facts into links. `classify` is asked once per link; the caller caches sysfs reads.
    /// Stacked links and tunnels then take the kind of what carries them (`Stacking`); `overrides` are the
    /// `[Interface]` sections, which win on the stacked link itself.
    public init(snapshot: KernelSnapshot, overrides: [InterfaceOverride] = [], classify: (LinkFacts) -> Classification) {
        var addrs: [Int32: [String]] = [:]
        for a in snapshot.addresses { addrs[a.index, default: []].append(a.text) }
        var v4: Set<Int32> = [], v6: Set<Int32> = []
        var metric: [Int32: UInt32] = [:]
        for r in snapshot.defaultRoutes {
            switch r.family {
            case .ipv4: v4.insert(r.index)
            case .ipv6: v6.insert(r.index)
            }
            metric[r.index] = min(metric[r.index] ?? .max, r.metric)
        }
        let own = snapshot.links.map { f in
            Link(facts: f, classification: classify(f), addresses: (addrs[f.index] ?? []).sorted(),
                 defaultRouteV4: v4.contains(f.index), defaultRouteV6: v6.contains(f.index), metric: metric[f.index],
                 wifi: snapshot.wifi[f.index], manager: snapshot.managed[f.name])
        }
        self.init(links: Stacking.apply(own, snapshot: snapshot, overrides: overrides), egress: snapshot.egress)
        markedEgress = snapshot.markedEgress
    }

    public var usableLinks: [Link] { links.filter { $0.usable && $0.kind != .loopback } }

    /// At least one non-loopback link is usable.
    public var available: Bool { links.contains { $0.usable && $0.kind != .loopback } }

    /// The link the kernel sends internet traffic by: IPv4's egress link, else IPv6's.
    public var primary: Link? {
        for f in AddressFamily.allCases { if let l = egressLink(f) { return l } }
        return nil
    }

    /// The link a family's traffic leaves by, if it leaves by one.
    public func egressLink(_ family: AddressFamily) -> Link? {
        guard case let .link(index)? = egress[family] else { return nil }
        return link(index: index)
    }

    public func link(index: Int32) -> Link? { links.first { $0.index == index } }

    /// The link traffic would prefer among `links`: the lowest default-route metric, ties to the lowest index.
    public func best<S: Sequence<Link>>(of links: S) -> Link? {
        links.min { ($0.metric ?? .max, $0.index) < ($1.metric ?? .max, $1.index) }
    }

    public func link(named name: String) -> Link? { links.first { $0.name == name } }
}
