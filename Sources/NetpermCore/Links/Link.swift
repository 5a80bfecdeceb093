// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Where the kernel sends a family's traffic to the internet now: what a route lookup (`ip route get`) of a probe
/// address answers, honouring rules, tables, route types, metrics and linkdown.
public enum Egress: Equatable, Sendable {
    /// Out of this link (ifindex).
    case link(Int32)
    /// A route that drops the traffic: blackhole, unreachable or prohibit.
    case blocked(RouteBlock)
}

/// What netlink says about a link (RTM_NEWLINK), before classification.
public struct LinkFacts: Equatable, Sendable {
    public var index: Int32
    public var name: String
    public var arphrd: UInt32
    /// The rtnl link kind (IFLA_INFO_KIND), e.g. "veth", "bridge"; nil for hardware devices.
    public var rtnlKind: String?
    public var adminUp: Bool
    public var carrier: Bool
    public var operstate: String
    /// IFLA_LINK: the link this one is stacked on (the lower link of a vlan, macvlan, ipvlan, macvtap; the
    /// device a tunnel is bound to). Nil when there is none, or when it lives in another namespace (a veth's
    /// peer, a macvlan moved into a container): an index there means nothing here.
    public var lowerIndex: Int32?
    /// IFLA_MASTER: the bond, bridge or team this link is a port of.
    public var masterIndex: Int32?
    /// The remote endpoint of a tunnel whose kernel knows it (ipip, gre, sit, ip6tnl, vti: IFLA_INFO_DATA),
    /// 4 or 16 bytes; nil when unknown or the wildcard address.
    public var tunnelRemote: [UInt8]?

    public init(index: Int32, name: String, arphrd: UInt32, rtnlKind: String?, adminUp: Bool, carrier: Bool,
                operstate: String, lowerIndex: Int32? = nil, masterIndex: Int32? = nil, tunnelRemote: [UInt8]? = nil) {
        self.index = index; self.name = name; self.arphrd = arphrd; self.rtnlKind = rtnlKind
        self.adminUp = adminUp; self.carrier = carrier; self.operstate = operstate
        self.lowerIndex = lowerIndex; self.masterIndex = masterIndex; self.tunnelRemote = tunnelRemote
    }
}

/// What nl80211 says of a Wi-Fi link: the network it is associated to. A link without an entry is not Wi-Fi, or
/// nl80211 is absent.
public struct WifiFacts: Equatable, Sendable {
    /// The SSID: up to 32 arbitrary bytes (not necessarily UTF-8); nil when not associated.
    public var ssid: [UInt8]?
    /// The access point's MAC address, "aa:bb:cc:dd:ee:ff"; nil when not associated.
    public var bssid: String?
    public init(ssid: [UInt8]? = nil, bssid: String? = nil) { self.ssid = ssid; self.bssid = bssid }
}

public struct AddressFacts: Equatable, Sendable {
    public var index: Int32
    public var family: AddressFamily
    /// "192.0.2.1/24" or "2001:db8::1/64".
    public var text: String
    public init(index: Int32, family: AddressFamily, text: String) {
        self.index = index; self.family = family; self.text = text
    }
}

/// A default route through one link that a socket bound to the link would take: the kernel's lookup of the
/// probe address with the link as output interface found a route of prefix length 0 through it (any table the
/// rules consult), with this metric.
public struct DefaultRouteFacts: Equatable, Sendable {
    public var index: Int32
    public var family: AddressFamily
    public var metric: UInt32
    public init(index: Int32, family: AddressFamily, metric: UInt32) {
        self.index = index; self.family = family; self.metric = metric
    }
}

/// A host route (/32 or /128) through a link, as VPN clients install one to their server so that the tunnel's
/// own packets do not enter the tunnel: the kernel's lookup of `destination` leaves by `index`.
public struct HostRouteFacts: Equatable, Sendable {
    public var index: Int32
    /// "192.0.2.7" or "2001:db8::7".
    public var destination: String
    public init(index: Int32, destination: String) { self.index = index; self.destination = destination }
}

/// Everything the kernel told us, as one consistent picture, with what sysfs says of each link's device.
public struct KernelSnapshot: Equatable, Sendable {
    public var links: [LinkFacts]
    public var addresses: [AddressFacts]
    public var defaultRoutes: [DefaultRouteFacts]
    /// Per family; no entry: no route at all.
    public var egress: [AddressFamily: Egress]
    /// By ifindex; a link without an entry has no sysfs facts (the classifier falls back to netlink's).
    public var sysfs: [Int32: SysfsFacts]
    /// By tunnel ifindex: where the kernel routes the tunnel's remote endpoint (`LinkFacts.tunnelRemote`).
    public var endpointRoutes: [Int32: Egress] = [:]
    /// Host routes through links other than tunnels, read only while a tunnel without a known endpoint (tun)
    /// is there: the candidates for the link a userspace VPN's packets leave by.
    public var hostRoutes: [HostRouteFacts] = []
    /// By ifindex: the Wi-Fi network of each wifi link nl80211 reports (none where nl80211 is absent).
    public var wifi: [Int32: WifiFacts] = [:]
    /// By interface name: what NetworkManager says of each device it manages (none where it does not run).
    public var managed: [String: NetworkManagerDevice] = [:]
    /// By interface name: where ModemManager says the modem behind each of its links is registered.
    public var modems: [String: ModemRegistration] = [:]
    /// Mode=steer: by mark in use, where a socket so marked sends each family's traffic (the kernel's lookup with
    /// `mark`); no entry for a family: no route.
    public var markedEgress: [UInt32: [AddressFamily: Egress]] = [:]
    /// How many times messages were lost (the event socket overran) and everything was read again; a change
    /// tells subscribers their events since are only the net change.
    public var resyncs = 0
    public init(links: [LinkFacts] = [], addresses: [AddressFacts] = [], defaultRoutes: [DefaultRouteFacts] = [],
                egress: [AddressFamily: Egress] = [:], sysfs: [Int32: SysfsFacts] = [:]) {
        self.links = links; self.addresses = addresses; self.defaultRoutes = defaultRoutes; self.egress = egress
        self.sysfs = sysfs
    }
}

/// A link as netpermd reports it.
public struct Link: Equatable, Sendable {
    public var index: Int32
    public var name: String
    public var kind: LinkKind
    public var classifiedBy: String
    public var metered: Bool
    /// What made `metered` what it is.
    public var meteredBy: MeteredSource
    /// Roaming abroad (a modem registered on another operator's network); nil when no source knows.
    public var roaming: Bool?
    public var roamingBy: RoamingSource?
    /// The connection NetworkManager has active on it (no `id` where none is).
    public var connection: ActiveConnection
    /// Up, carrier and operstate, as netlink has them.
    public var status: LinkStatus
    /// The link whose kind this one took (its lower link, its most restrictive port, the link a tunnel's own
    /// packets leave by); nil when not stacked, or when config set its kind.
    public var over: String?
    public var addresses: [String]
    /// Whether a default route of each family leaves by it.
    public var defaultRoute: DefaultRoutes
    /// Lowest metric among this link's default routes, nil without one.
    public var metric: UInt32?
    /// The Wi-Fi network it is associated to (nl80211); none when not Wi-Fi or not associated.
    public var wifi: WifiFacts

    /// Admin up, carrier, and a default route through it: traffic bound to it would get out.
    public var usable: Bool { status.adminUp && status.carrier && metric != nil }

    public init(facts: LinkFacts, classification: Classification, addresses: [String],
                defaultRouteV4: Bool, defaultRouteV6: Bool, metric: UInt32?, wifi: WifiFacts? = nil,
                manager: NetworkManagerDevice? = nil) {
        index = facts.index; name = facts.name
        kind = classification.kind; classifiedBy = classification.by; metered = classification.metered
        over = nil
        meteredBy = classification.meteredBy
        roaming = classification.roaming; roamingBy = classification.roamingBy
        status = LinkStatus(adminUp: facts.adminUp, carrier: facts.carrier, operstate: facts.operstate)
        self.addresses = addresses
        defaultRoute = DefaultRoutes(ipv4: defaultRouteV4, ipv6: defaultRouteV6); self.metric = metric
        self.wifi = WifiFacts(ssid: wifi?.ssid, bssid: wifi?.bssid)
        connection = ActiveConnection(id: manager?.connectionID, type: manager?.connectionType)
    }

    /// "tun0 over wwan0", or the name alone.
    public var nameOver: String { over.map { "\(name) over \($0)" } ?? name }

    /// The SSID as shown: arbitrary bytes, so invalid UTF-8 is `\xNN` and controls are escaped (SafeText).
    public var ssidText: String? { wifi.ssid.map { SafeText.escape(utf8: $0) } }

    /// A link as verdicts name it: `index`, `name`, `kind`, `metered`, `roaming` (as judged: unknown is home),
    /// `over`.
    public func writeReference(to s: inout JSONWriter) {
        s.field("index", Int(index))
        s.field("name", name)
        s.field("kind", kind.rawValue)
        s.field("metered", metered)
        s.field("roaming", roaming == true)
        s.field("over", over)
    }

    /// The members of a LINKS entry and a link event's `link`.
    public func write(to s: inout JSONWriter) {
        s.field("index", Int(index))
        s.field("name", name)
        s.field("kind", kind.rawValue)
        s.field("classified_by", classifiedBy)
        s.field("metered", metered)
        s.field("metered_by", meteredBy.rawValue)
        s.field("roaming", roaming)
        s.field("roaming_by", roamingBy?.rawValue)
        s.field("over", over)
        s.field("admin_up", status.adminUp)
        s.field("carrier", status.carrier)
        s.field("operstate", status.operstate)
        s.field("addresses", strings: addresses)
        s.object("default_route") {
            $0.field("ipv4", defaultRoute.ipv4)
            $0.field("ipv6", defaultRoute.ipv6)
        }
        s.field("metric", metric.map { Int($0) })
        s.field("usable", usable)
        s.field("ssid", ssidText)
        s.field("bssid", wifi.bssid)
        s.object("connection", connection.id) { w, id in
            w.field("id", id)
            w.field("type", connection.type)
        }
    }
}

/// A link's state as netlink has it: what `usable` needs beside a default route.
public struct LinkStatus: Equatable, Sendable {
    public var adminUp: Bool
    public var carrier: Bool
    /// IF_OPER_*, as a word ("up", "down", "dormant"...).
    public var operstate: String
    public init(adminUp: Bool, carrier: Bool, operstate: String) {
        self.adminUp = adminUp; self.carrier = carrier; self.operstate = operstate
    }
}

/// Whether a default route of each family leaves by a link.
public struct DefaultRoutes: Equatable, Sendable {
    public var ipv4: Bool
    public var ipv6: Bool
    public init(ipv4: Bool, ipv6: Bool) { self.ipv4 = ipv4; self.ipv6 = ipv6 }
    public subscript(_ family: AddressFamily) -> Bool {
        switch family {
        case .ipv4: return ipv4
        case .ipv6: return ipv6
        }
    }
}

/// The connection NetworkManager has active on a link: its `Id` ("Home") and `Type` ("802-11-wireless"); nil where
/// none is.
public struct ActiveConnection: Equatable, Sendable {
    public var id: String?
    public var type: String?
    public init(id: String? = nil, type: String? = nil) { self.id = id; self.type = type }
}
