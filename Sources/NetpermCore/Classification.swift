/// What sysfs says about a link's device, read by the edge with an injectable root.
public struct SysfsFacts: Equatable, Sendable {
    /// DEVTYPE= from /sys/class/net/NAME/uevent ("wlan", "wwan", "bridge", ...).
    public var devtype: String?
    /// /sys/class/net/NAME/phy80211 exists.
    public var hasPhy80211: Bool
    /// /sys/class/net/NAME/wireless exists.
    public var hasWireless: Bool

    public init(devtype: String? = nil, hasPhy80211: Bool = false, hasWireless: Bool = false) {
        self.devtype = devtype; self.hasPhy80211 = hasPhy80211; self.hasWireless = hasWireless
    }
}

/// `[Interface GLOB]` from the config: forces the kind and/or metered flag of matching links.
public struct InterfaceOverride: Equatable, Sendable {
    public var glob: Glob
    public var kind: LinkKind?
    public var metered: Bool?
    public init(glob: Glob, kind: LinkKind?, metered: Bool?) {
        self.glob = glob; self.kind = kind; self.metered = metered
    }
}

/// `[Network SSID]` from the config: forces the kind and/or metered flag of a Wi-Fi link while it is associated
/// to a network whose SSID matches.
public struct NetworkOverride: Equatable, Sendable {
    public var glob: Glob
    public var kind: LinkKind?
    public var metered: Bool?
    public init(glob: Glob, kind: LinkKind?, metered: Bool?) {
        self.glob = glob; self.kind = kind; self.metered = metered
    }

    /// An SSID is bytes; a glob is text. Bytes that are not UTF-8 become U+FFFD, which only a wildcard matches.
    public func matches(ssid: [UInt8]) -> Bool { glob.matches(String(decoding: ssid, as: UTF8.self)) }
}

public struct Classification: Equatable, Sendable {
    public var kind: LinkKind
    /// Which rule decided, e.g. "config:[Interface wwan*]", "sysfs:devtype=wlan", "arphrd:ether".
    public var by: String
    public var metered: Bool
    public init(kind: LinkKind, by: String, metered: Bool) { self.kind = kind; self.by = by; self.metered = metered }
}

/// Link-layer types from <linux/if_arp.h> that the rules look at.
public enum ARPHRD {
    public static let ether: UInt32 = 1
    public static let ppp: UInt32 = 512
    public static let rawip: UInt32 = 519
    public static let loopback: UInt32 = 772
    public static let none: UInt32 = 0xFFFE
}

public enum Classifier {
    /// rtnl kinds of purely virtual links. A tunnel (tun, wireguard) is ARPHRD_NONE like a cellular modem,
    /// but it is not cellular, so these are excluded from the ARPHRD none/raw-ip rule.
    public static let virtualKinds: Set<String> = [
        "veth", "bridge", "tun", "tap", "wireguard", "bond", "vlan", "macvlan", "macvtap", "ipvlan", "vxlan",
        "gre", "gretap", "ip6gre", "ipip", "sit", "ip6tnl", "vti", "vti6", "dummy", "vrf", "team", "geneve",
        "ifb", "nlmon", "xfrm", "batadv", "hsr", "netkit",
    ]

    /// First match wins; the winning rule is reported in `by`. Then the `[Interface]` overrides, then, for a
    /// Wi-Fi link associated to a network (`wifi`), the `[Network]` ones: what the network is beats what the
    /// device is (a laptop's wlan0 is unmetered at home and metered on a phone's hotspot).
    public static func classify(_ link: LinkFacts, sysfs: SysfsFacts, overrides: [InterfaceOverride],
                                wifi: WifiFacts? = nil, networks: [NetworkOverride] = []) -> Classification {
        let base = builtIn(link, sysfs: sysfs)
        // Later [Interface] sections override earlier ones (systemd's rule for repeated settings).
        var result = base
        var meteredSet = false
        for o in overrides where o.glob.matches(link.name) {
            if let k = o.kind {
                result.kind = k
                result.by = "config:[Interface \(o.glob.pattern)]"
                // An explicit Metered= (from any matching section) beats the kind's default.
                if !meteredSet { result.metered = k == .wwan }
            }
            if let m = o.metered {
                result.metered = m
                meteredSet = true
            }
        }
        guard let ssid = wifi?.ssid else { return result }
        for o in networks where o.matches(ssid: ssid) {
            if let k = o.kind {
                result.kind = k
                result.by = "config:[Network \(o.glob.pattern)]"
                if !meteredSet { result.metered = k == .wwan }
            }
            if let m = o.metered {
                result.metered = m
                meteredSet = true
                // metered_by: config (the [Network] section) — set here once Classification carries it.
            }
        }
        return result
    }

    static func builtIn(_ link: LinkFacts, sysfs: SysfsFacts) -> Classification {
        func make(_ kind: LinkKind, _ by: String) -> Classification {
            Classification(kind: kind, by: by, metered: kind == .wwan)
        }
        switch sysfs.devtype {
        case "wlan": return make(.wifi, "sysfs:devtype=wlan")
        case "wwan": return make(.wwan, "sysfs:devtype=wwan")
        default: break
        }
        if sysfs.hasPhy80211 { return make(.wifi, "sysfs:phy80211") }
        if sysfs.hasWireless { return make(.wifi, "sysfs:wireless") }
        let virtual = link.rtnlKind.map { virtualKinds.contains($0) } ?? false
        switch link.arphrd {
        case ARPHRD.loopback: return make(.loopback, "arphrd:loopback")
        case ARPHRD.ppp: return make(.wwan, "arphrd:ppp")
        case ARPHRD.none where !virtual: return make(.wwan, "arphrd:none")
        case ARPHRD.rawip where !virtual: return make(.wwan, "arphrd:rawip")
        default: break
        }
        if let k = link.rtnlKind, virtual { return make(.other, "rtnl-kind:\(k)") }
        if link.arphrd == ARPHRD.ether { return make(.ethernet, "arphrd:ether") }
        if link.name.hasPrefix("wl") { return make(.wifi, "name:wl") }
        if link.name.hasPrefix("ww") { return make(.wwan, "name:ww") }
        return make(.other, "fallback")
    }
}
