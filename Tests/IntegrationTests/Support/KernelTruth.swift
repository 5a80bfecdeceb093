// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the kernel says, read with iproute2 the way an administrator would, and compared with what the daemon
/// says: links and addresses (`ip -j link`, `ip -j addr`), each link's default route as a bound socket would take
/// it (`ip -j route get fibmatch PROBE oif LINK`), each family's egress (`ip -j route get PROBE`), and every app's
/// verdict under the rules of docs/ROUTING.md, computed here independently from those facts.
struct KernelTruth {
    /// A policy whose apps cover the verdict's cases, and links classified by name.
    static let policy = """
        [Defaults]
        WiFi=allow
        WWAN=allow
        Ethernet=allow
        Other=allow

        [Interface wl*]
        Kind=wifi

        [Interface va]
        Kind=wifi

        [Interface ww*]
        Kind=wwan

        [Interface vb]
        Kind=wwan

        [Interface eth*]
        Kind=ethernet

        [Interface br*]
        Kind=ethernet

        [App all]
        User=1

        [App wifionly]
        User=2
        WWAN=deny
        Ethernet=deny
        Other=deny

        [App nocell]
        User=3
        WWAN=deny

        """

    /// App -> the kinds it may use.
    static let apps: [String: Set<String>] = [
        "all": ["wifi", "wwan", "ethernet", "other"], "wifionly": ["wifi"], "nocell": ["wifi", "ethernet", "other"],
    ]

    /// A link's own kind, by name as the policy's `[Interface]` sections (and loopback) make it.
    static func kind(of name: String) -> String {
        if name == "lo" { return "loopback" }
        if name.hasPrefix("wl") || name == "va" { return "wifi" }
        if name.hasPrefix("ww") || name == "vb" { return "wwan" }
        if name.hasPrefix("eth") || name.hasPrefix("br") { return "ethernet" }
        return "other"
    }

    static let probes: [String: String] = ["ipv4": "1.1.1.1", "ipv6": "2606:4700:4700::1111"]
    static let families = ["ipv4", "ipv6"]

    struct LinkFacts: Equatable, CustomStringConvertible {
        var index: Int
        var name: String
        var adminUp: Bool
        var carrier: Bool
        var operstate: String
        var addresses: Set<String>
        /// Per family: the metric of the default route a socket bound to the link would take, if any.
        var defaultMetric: [String: Int]
        var description: String {
            "\(name)#\(index)(admin \(adminUp), carrier \(carrier), oper \(operstate), addrs \(addresses.sorted()), "
                + "default \(defaultMetric.sorted { $0.key < $1.key })"
        }
    }

    enum Egress: Equatable, CustomStringConvertible {
        case link(String)
        case blocked(String)
        var description: String {
            switch self {
            case let .link(n): return n
            case let .blocked(b): return "blocked:\(b)"
            }
        }
    }

    var links: [String: LinkFacts] = [:]
    var egress: [String: Egress] = [:]
    /// Links whose rtnl kind (`ip -d link`'s info_kind) is a tunnel's.
    var tunnels: Set<String> = []
    /// For each host route (/32, /128, unicast, outside the local table, through one link), the link
    /// `ip route get HOST` leaves by.
    var hostRouteLinks: [String] = []
    /// Bridges (`info_kind` bridge) and, by bridge, the names of their ports (`master`).
    var bridges: Set<String> = []
    var ports: [String: [String]] = [:]

    static let tunnelKinds: Set<String> = ["tun", "wireguard", "ipip", "gre", "sit", "ip6tnl", "vti", "vxlan", "geneve"]
    /// The order docs/CLASSIFICATION.md gives "most restrictive".
    static let restrictiveness = ["loopback": 0, "other": 1, "ethernet": 2, "wifi": 3, "wwan": 4]

    /// The kind the daemon should report, per docs/CLASSIFICATION.md, "Stacked links and tunnels": a tunnel no
    /// `[Interface]` names takes the most restrictive kind of the host routes' links that are not tunnels, else the
    /// kind of the best usable link that is not a tunnel, else its own. A bridge no `[Interface]` names takes
    /// the most restrictive kind of its ports; the test makes no vlan or macvlan.)
    func kind(of name: String) -> String {
        let own = Self.kind(of: name)
        // A bridge no [Interface] names (the fuzz renames them) takes the most restrictive of its ports' kinds.
        if bridges.contains(name), !Self.configured(name) {
            let kinds = (ports[name] ?? []).map { kind(of: $0) }
            return kinds.max(by: { Self.restrictiveness[$0]! < Self.restrictiveness[$1]! }) ?? own
        }
        guard tunnels.contains(name), own == "other", !Self.configured(name) else { return own }
        // The daemon reads host routes only while such a tunnel is up (a machine with none never dumps routes): with
        // every one down (tun0 down), a tunnel takes the fallback.
        let hostsRead = tunnels.contains { links[$0]?.adminUp == true }
        let viaHosts = (hostsRead ? hostRouteLinks : []).filter { !tunnels.contains($0) && $0 != name }.map(Self.kind(of:))
            .filter { $0 != "loopback" }
        if let k = viaHosts.max(by: { Self.restrictiveness[$0]! < Self.restrictiveness[$1]! }) { return k }
        let candidates = links.values.filter { usable($0.name) && !tunnels.contains($0.name) && Self.kind(of: $0.name) != "loopback" }
        guard let best = candidates.min(by: { ($0.defaultMetric.values.min()!, $0.index) < ($1.defaultMetric.values.min()!, $1.index) })
        else { return own }
        return Self.kind(of: best.name)
    }

    /// An `[Interface]` section of the policy names the link.
    static func configured(_ name: String) -> Bool {
        ["wl", "ww", "eth", "br"].contains { name.hasPrefix($0) } || name == "va" || name == "vb"
    }

    /// Reads it all from the namespace.
    static func read(_ ns: TestNamespace) throws -> KernelTruth {
        var t = KernelTruth()
        let linksJSON = try jsonArray(ns, ["-d", "-j", "link"])
        let addrsJSON = try jsonArray(ns, ["-j", "addr"])
        var addrs: [String: Set<String>] = [:]
        for entry in addrsJSON {
            guard let name = entry["ifname"] as? String else { continue }
            for a in entry["addr_info"] as? [[String: Any]] ?? [] {
                guard let local = a["local"] as? String, let len = a["prefixlen"] as? Int,
                      let family = a["family"] as? String, family == "inet" || family == "inet6" else { continue }
                addrs[name, default: []].insert("\(local)/\(len)")
            }
        }
        for l in linksJSON {
            guard let name = l["ifname"] as? String, let index = l["ifindex"] as? Int,
                  let flags = l["flags"] as? [String], let oper = l["operstate"] as? String else { continue }
            var f = LinkFacts(index: index, name: name, adminUp: flags.contains("UP"),
                              carrier: flags.contains("LOWER_UP"), operstate: oper.lowercased(),
                              addresses: addrs[name] ?? [], defaultMetric: [:])
            // The daemon does not ask about loopback's routes: it carries no app's traffic out.
            if f.adminUp && l["link_type"] as? String != "loopback" {
                for family in families {
                    if let route = try routeGet(ns, family, oif: name, fibMatch: true), route["dst"] as? String == "default" {
                        f.defaultMetric[family] = route["metric"] as? Int ?? 0
                    }
                }
            }
            t.links[name] = f
            if (l["linkinfo"] as? [String: Any])?["info_kind"] as? String == "bridge" { t.bridges.insert(name) }
            if let master = l["master"] as? String { t.ports[master, default: []].append(name) }
            // A tap on a bridge is the bridge's port, not a tunnel.
            if let k = (l["linkinfo"] as? [String: Any])?["info_kind"] as? String, tunnelKinds.contains(k),
               l["master"] == nil {
                t.tunnels.insert(name)
            }
        }
        for family in ["-4", "-6"] {
            for r in try jsonArray(ns, [family, "-j", "route", "show", "table", "all"]) {
                guard let dst = r["dst"] as? String, dst != "default", !dst.contains("/"), r["dev"] != nil,
                      (r["type"] as? String ?? "unicast") == "unicast", r["table"] as? String != "local" else { continue }
                let get = try Subprocess.run(["ip", "-n", ns.name, "-j", "route", "get", dst])
                guard get.status == 0,
                      let dev = (try JSONSerialization.jsonObject(with: Data(get.stdoutBytes)) as? [[String: Any]])?.first?["dev"] as? String
                else { continue }
                t.hostRouteLinks.append(dev)
            }
        }
        for family in families {
            let r = try Subprocess.run(["ip", "-n", ns.name, family == "ipv4" ? "-4" : "-6", "-j", "route", "get",
                                        probes[family]!])
            if r.status == 0 {
                let route = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]]
                if let dev = route?.first?["dev"] as? String { t.egress[family] = .link(dev) }
            } else if r.stderr.contains("Invalid argument") {
                t.egress[family] = .blocked("blackhole")
            } else if r.stderr.contains("No route to host") {
                t.egress[family] = .blocked("unreachable")
            } else if r.stderr.contains("Permission denied") {
                t.egress[family] = .blocked("prohibit")
            }
        }
        return t
    }

    private static func jsonArray(_ ns: TestNamespace, _ args: [String]) throws -> [[String: Any]] {
        let r = try Subprocess.run(["ip", "-n", ns.name] + args)
        guard r.status == 0 else { throw HarnessError("ip \(args) failed: \(r.summary)") }
        guard let a = try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]] else {
            throw HarnessError("ip \(args) did not print a JSON array: \(r.stdout)")
        }
        return a
    }

    /// `ip -j route get [fibmatch] PROBE oif LINK`: the route, or nil when there is none.
    private static func routeGet(_ ns: TestNamespace, _ family: String, oif: String, fibMatch: Bool) throws -> [String: Any]? {
        let r = try Subprocess.run(["ip", "-n", ns.name, family == "ipv4" ? "-4" : "-6", "-j", "route", "get"]
            + (fibMatch ? ["fibmatch"] : []) + [probes[family]!, "oif", oif])
        guard r.status == 0 else { return nil }
        return (try JSONSerialization.jsonObject(with: Data(r.stdoutBytes)) as? [[String: Any]])?.first
    }

    func usable(_ name: String) -> Bool {
        guard let l = links[name] else { return false }
        return l.adminUp && l.carrier && !l.defaultMetric.isEmpty
    }

    /// The differences between the daemon's LINKS (and STATUS egress) and the kernel, as readable lines; empty when
    /// they agree.
    func differences(links daemon: [DaemonLink], egress daemonEgress: [String: Egress?]) -> [String] {
        var out: [String] = []
        let byName = Dictionary(daemon.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for name in Set(links.keys).union(byName.keys).sorted() {
            guard let k = links[name] else { out.append("\(name): the daemon has it, the kernel not"); continue }
            guard let d = byName[name] else { out.append("\(name): the kernel has it, the daemon not"); continue }
            if d.index != k.index { out.append("\(name): index \(d.index) != kernel \(k.index)") }
            if d.adminUp != k.adminUp { out.append("\(name): admin_up \(d.adminUp) != kernel \(k.adminUp)") }
            if d.carrier != k.carrier { out.append("\(name): carrier \(d.carrier) != kernel \(k.carrier)") }
            if d.operstate != k.operstate { out.append("\(name): operstate \(d.operstate) != kernel \(k.operstate)") }
            if Set(d.addresses) != k.addresses { out.append("\(name): addresses \(d.addresses.sorted()) != kernel \(k.addresses.sorted())") }
            if d.defaultRouteV4 != (k.defaultMetric["ipv4"] != nil) || d.defaultRouteV6 != (k.defaultMetric["ipv6"] != nil) {
                out.append("\(name): default route v4 \(d.defaultRouteV4) v6 \(d.defaultRouteV6) != kernel \(k.defaultMetric)")
            }
            if d.metric != k.defaultMetric.values.min() { out.append("\(name): metric \(d.metric.map(String.init) ?? "null") != kernel \(k.defaultMetric)") }
            if d.usable != usable(name) { out.append("\(name): usable \(d.usable) != kernel \(usable(name))") }
            if d.kind != kind(of: name) { out.append("\(name): kind \(d.kind) (\(d.classifiedBy)) != expected \(kind(of: name))") }
        }
        for family in Self.families where (daemonEgress[family] ?? nil) != egress[family] {
            out.append("egress \(family): \((daemonEgress[family] ?? nil)?.description ?? "none") != kernel "
                + (egress[family]?.description ?? "none"))
        }
        return out
    }

    /// The verdict docs/ROUTING.md gives an app whose kinds map `kindOf` and allowed kinds `allowed` (no `ask`):
    /// (reason, via, bind_to).
    func expectedVerdict(allowed: Set<String>, kindOf: (String) -> String) -> (reason: String, via: String?, bindTo: String?) {
        let usableLinks = links.values.filter { usable($0.name) && kindOf($0.name) != "loopback" }
        var working: String?, leaking = false
        for family in Self.families {
            guard case let .link(name)? = egress[family], usable(name) else { continue }
            if allowed.contains(kindOf(name)) { working = working ?? name } else { leaking = true }
        }
        if let working, !leaking { return ("ok", working, nil) }
        if usableLinks.isEmpty { return ("no-network", nil, nil) }
        let candidates = usableLinks.filter { allowed.contains(kindOf($0.name)) }
        if let bind = candidates.min(by: { ($0.defaultMetric.values.min()!, $0.index) < ($1.defaultMetric.values.min()!, $1.index) }) {
            return ("routed-elsewhere", nil, bind.name)
        }
        return ("denied", nil, nil)
    }
}

extension KernelTruth.Egress {
    /// From a STATUS or verdict `egress` member.
    init?(daemon o: Any?) {
        guard let o = o as? [String: Any] else { return nil }
        if let b = o["blocked"] as? String { self = .blocked(b) } else if let n = o["name"] as? String { self = .link(n) } else { return nil }
    }
}

extension IntegrationTestCase {
    /// Waits (bounded) until the daemon's links, egress and every app's verdict agree with the kernel; returns the
    /// kernel's picture. `what` names the moment in a failure.
    @discardableResult
    func assertAgrees(_ ns: TestNamespace, _ socket: String, _ what: String, timeout: Double = 5) throws -> KernelTruth {
        var last = ""
        var truth = KernelTruth()
        try waitUntil("daemon = kernel: \(what)", timeout: timeout, interval: 0.05) {
            truth = try KernelTruth.read(ns)
            let status = try request(socket, "STATUS")
            let egress = status["egress"] as? [String: Any] ?? [:]
            var diff = truth.differences(links: try links(socket),
                                         egress: Dictionary(uniqueKeysWithValues: KernelTruth.families.map {
                                             ($0, KernelTruth.Egress(daemon: egress[$0]))
                                         }))
            for (app, allowed) in KernelTruth.apps.sorted(by: { $0.key < $1.key }) {
                let v = try request(socket, "QUERY \(app)")
                let want = truth.expectedVerdict(allowed: allowed, kindOf: truth.kind(of:))
                let via = (v["via"] as? [String: Any])?["name"] as? String
                let bind = (v["bind_to"] as? [String: Any])?["name"] as? String
                if v["reason"] as? String != want.reason || via != want.via || bind != want.bindTo {
                    diff.append("\(app): \(v["reason"] ?? "?") via \(via ?? "-") bind \(bind ?? "-") != expected "
                        + "\(want.reason) via \(want.via ?? "-") bind \(want.bindTo ?? "-")")
                }
            }
            last = diff.joined(separator: "\n") + "\nkernel: \(truth.links.values.map(\.description).sorted()), egress \(truth.egress)"
            return (diff.isEmpty, last)
        }
        return truth
    }

}
