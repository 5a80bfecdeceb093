/// The daemon's picture of the network: every link, classified, with its addresses and default routes.
public struct NetworkState: Equatable, Sendable {
    /// Sorted by index.
    public private(set) var links: [Link]

    /// One link per index (the first wins), sorted by index.
    public init(links: [Link] = []) {
        var seen: Set<Int32> = []
        self.links = links.filter { seen.insert($0.index).inserted }.sorted { $0.index < $1.index }
    }

    /// Joins the kernel's facts into links. `classify` is asked once per link; the caller caches sysfs reads.
    public init(snapshot: KernelSnapshot, classify: (LinkFacts) -> Classification) {
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
        self.init(links: snapshot.links.map { f in
            Link(facts: f, classification: classify(f), addresses: (addrs[f.index] ?? []).sorted(),
                 defaultRouteV4: v4.contains(f.index), defaultRouteV6: v6.contains(f.index), metric: metric[f.index])
        })
    }

    public var usableLinks: [Link] { links.filter { $0.usable && $0.kind != .loopback } }

    /// At least one non-loopback link is usable.
    public var available: Bool { links.contains { $0.usable && $0.kind != .loopback } }

    /// The usable link whose default route has the lowest metric (ties: lowest index).
    public var primary: Link? { best(of: usableLinks) }

    /// The link traffic would prefer among `links`: the lowest default-route metric, ties to the lowest index.
    public func best<S: Sequence<Link>>(of links: S) -> Link? {
        links.min { ($0.metric ?? .max, $0.index) < ($1.metric ?? .max, $1.index) }
    }

    public func link(named name: String) -> Link? { links.first { $0.name == name } }
}
