// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// What the edge reads about a link's device besides netlink, with an injectable root: sysfs, and for PPP and
/// DHCP a few files of /proc and /run. Everything the built-in rules look at; the core does no I/O.
public struct SysfsFacts: Equatable, Sendable {
    /// DEVTYPE= from /sys/class/net/NAME/uevent ("wlan", "wwan", "bluetooth", "bridge", ...).
    public var devtype: String?
    /// /sys/class/net/NAME/phy80211 exists.
    public var hasPhy80211: Bool
    /// /sys/class/net/NAME/wireless exists.
    public var hasWireless: Bool
    /// The device's driver: the basename of the `device/driver` symlink ("iwlwifi", "qmi_wwan", "rndis_host").
    public var driver: String?
    /// The device's bus: the basename of the `device/subsystem` symlink ("pci", "usb", "sdio", "mhi").
    public var bus: String?
    /// For a USB network interface, its interface class, subclass and protocol (`device/bInterfaceClass` ...).
    public var usbInterface: USBInterfaceClass?
    /// For a USB network interface, the USB device's vendor id (`device/../idVendor`).
    public var usbVendor: UInt16?
    /// For a PPP link, what carries it (from /proc and pppd's pid file); nil when not known.
    public var pppChannel: PPPChannel?
    /// The link's DHCP lease carries Android's ANDROID_METERED vendor option (as the DHCP client recorded it).
    public var dhcpAndroidMetered: Bool

    public init(devtype: String? = nil, hasPhy80211: Bool = false, hasWireless: Bool = false, driver: String? = nil,
                bus: String? = nil, usbInterface: USBInterfaceClass? = nil, usbVendor: UInt16? = nil,
                pppChannel: PPPChannel? = nil, dhcpAndroidMetered: Bool = false) {
        self.devtype = devtype; self.hasPhy80211 = hasPhy80211; self.hasWireless = hasWireless
        self.driver = driver; self.bus = bus; self.usbInterface = usbInterface; self.usbVendor = usbVendor
        self.pppChannel = pppChannel; self.dhcpAndroidMetered = dhcpAndroidMetered
    }
}

/// A USB interface's class triple, as `bInterfaceClass`, `bInterfaceSubClass`, `bInterfaceProtocol` give it.
public struct USBInterfaceClass: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var interfaceClass: UInt8
    public var subclass: UInt8
    public var interfaceProtocol: UInt8
    public init(_ interfaceClass: UInt8, _ subclass: UInt8, _ interfaceProtocol: UInt8) {
        self.interfaceClass = interfaceClass; self.subclass = subclass; self.interfaceProtocol = interfaceProtocol
    }

    /// "e0/01/03", as lsusb and sysfs write the bytes.
    public var description: String {
        [interfaceClass, subclass, interfaceProtocol].map { b in
            let h = String(b, radix: 16)
            return h.count == 1 ? "0" + h : h
        }.joined(separator: "/")
    }
}

/// What a PPP unit runs over, as far as the edge can tell.
public enum PPPChannel: Equatable, Sendable {
    /// A serial line: a modem's AT/PPP port (/dev/ttyUSB*, ttyACM*, ...). The device path.
    case tty(String)
    /// A pseudo-terminal: pppd driven by another program (the PPTP client, PPP over SSH).
    case pty
    /// A PPPoE session; the Ethernet device it runs on when one can be told.
    case pppoe(device: String?)
    /// An L2TP session (/proc/net/pppol2tp names the unit).
    case l2tp
}

/// Where a link's metered flag came from, in the order they are asked.
public enum MeteredSource: String, Sendable, CaseIterable {
    /// `Metered=` in a matching `[Interface]` or `[Network]` section (either way).
    case config
    /// NetworkManager's `Device.Metered`: the person's setting for the connection, or NetworkManager's guess.
    case networkManager = "networkmanager"
    /// The kind: wwan is metered.
    case kind
    /// A phone's or a cellular router's tethering (USB, Bluetooth).
    case tethering
    /// The DHCP server said so (Android's ANDROID_METERED vendor option).
    case dhcp
    /// Nothing said metered.
    case `default`
}

/// Where a link's roaming flag came from.
public enum RoamingSource: String, Sendable, CaseIterable {
    /// `Roaming=` in a matching `[Interface]` or `[Network]` section.
    case config
    /// ModemManager's registration state of the modem behind the link.
    case modemManager = "modemmanager"
}

public struct Classification: Equatable, Sendable {
    public var kind: LinkKind
    /// Which rule decided, e.g. "config:[Interface wwan*]", "sysfs:devtype=wlan", "driver:rndis_host".
    public var by: String
    public var metered: Bool
    public var meteredBy: MeteredSource
    /// Whether the link is roaming; nil when no source knows (not a modem, or registered nowhere it can say).
    public var roaming: Bool? = nil
    public var roamingBy: RoamingSource? = nil

    public init(kind: LinkKind, by: String, metered: Bool, meteredBy: MeteredSource, roaming: Bool? = nil,
                roamingBy: RoamingSource? = nil) {
        self.kind = kind; self.by = by; self.metered = metered; self.meteredBy = meteredBy
        self.roaming = roaming; self.roamingBy = roaming == nil ? nil : roamingBy
    }

    /// The provenance the rules before tethering and DHCP gave: wwan metered by kind, others unmetered by default,
    /// anything else by config.
    public init(kind: LinkKind, by: String, metered: Bool) {
        let source: MeteredSource = metered == (kind == .wwan) ? (metered ? .kind : .default) : .config
        self.init(kind: kind, by: by, metered: metered, meteredBy: source)
    }
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
    /// What a built-in rule found, before the config and the metered sources.
    struct Found {
        var kind: LinkKind
        var by: String
        var tethering = false
    }

    /// Kind first (config, then the built-in rules, first match wins, reported in `by`), then metered with its
    /// source: config, NetworkManager (`manager`), tethering, kind (wwan), dhcp, default; then roaming: config,
    /// ModemManager (`modem`). The `[Interface]` overrides come first, then, for a Wi-Fi link associated to a
    /// network (`wifi`), the `[Network]` ones: what the network is beats what the device is (a laptop's wlan0 is
    /// unmetered at home and metered on a phone's hotspot). The person's word in the config beats NetworkManager's,
    /// whose word (the person's setting in GNOME, or its guess from the hotspot's DHCP option) beats netpermd's
    /// own guesses from the device. NetworkManager's device type never changes the kind (the caller logs a
    /// disagreement).
    public static func classify(_ link: LinkFacts, sysfs: SysfsFacts, overrides: [InterfaceOverride],
                                wifi: WifiFacts? = nil, networks: [NetworkOverride] = [],
                                manager: NetworkManagerDevice? = nil, modem: ModemRegistration? = nil) -> Classification {
        var found = builtIn(link, sysfs: sysfs)
        // Later [Interface] sections override earlier ones (systemd's rule for repeated settings).
        var metered: Bool?, roaming: Bool?
        for o in overrides where o.glob.matches(link.name) {
            if let k = o.kind {
                // A configured kind replaces all the rules said, tethering included.
                found = Found(kind: k, by: "config:[Interface \(o.glob.pattern)]")
            }
            if let m = o.metered { metered = m }
            if let r = o.roaming { roaming = r }
        }
        if let ssid = wifi?.ssid {
            for o in networks where o.matches(ssid: ssid) {
                if let k = o.kind { found = Found(kind: k, by: "config:[Network \(o.glob.pattern)]") }
                if let m = o.metered { metered = m }
                if let r = o.roaming { roaming = r }
            }
        }
        let (m, source): (Bool, MeteredSource) =
            if let metered { (metered, .config) }
            else if let nm = manager?.metered.value { (nm, .networkManager) }
            else if found.tethering { (true, .tethering) }
            else if found.kind == .wwan { (true, .kind) }
            else if sysfs.dhcpAndroidMetered { (true, .dhcp) }
            else { (false, .default) }
        let (r, roamingSource): (Bool?, RoamingSource?) =
            if let roaming { (roaming, .config) }
            else if let mm = modem?.roaming { (mm, .modemManager) }
            else { (nil, nil) }
        return Classification(kind: found.kind, by: found.by, metered: m, meteredBy: source, roaming: r,
                              roamingBy: roamingSource)
    }

    /// The built-in rules in order; docs/CLASSIFICATION.md has them as a table.
    static func builtIn(_ link: LinkFacts, sysfs: SysfsFacts) -> Found {
        switch sysfs.devtype {
        case "wlan": return Found(kind: .wifi, by: "sysfs:devtype=wlan")
        case "wwan": return Found(kind: .wwan, by: "sysfs:devtype=wwan")
        default: break
        }
        if sysfs.hasPhy80211 { return Found(kind: .wifi, by: "sysfs:phy80211") }
        if sysfs.hasWireless { return Found(kind: .wifi, by: "sysfs:wireless") }
        // bnep: Bluetooth PAN, a phone sharing its connection.
        if sysfs.devtype == "bluetooth" { return Found(kind: tetheringKind, by: "sysfs:devtype=bluetooth", tethering: true) }
        if let found = DeviceRules.byDevice(sysfs) { return found }
        let virtual = link.rtnlKind.map { virtualKinds.contains($0) } ?? false
        if !virtual, let prefix = modemNamePrefixes.first(where: { link.name.hasPrefix($0) }) {
            return Found(kind: .wwan, by: "name:\(prefix)")
        }
        switch link.arphrd {
        case ARPHRD.loopback: return Found(kind: .loopback, by: "arphrd:loopback")
        case ARPHRD.ppp: return ppp(sysfs.pppChannel)
        case ARPHRD.none where !virtual: return Found(kind: .wwan, by: "arphrd:none")
        case ARPHRD.rawip where !virtual: return Found(kind: .wwan, by: "arphrd:rawip")
        default: break
        }
        if let k = link.rtnlKind, virtual { return Found(kind: .other, by: "rtnl-kind:\(k)") }
        if link.arphrd == ARPHRD.ether { return Found(kind: .ethernet, by: "arphrd:ether") }
        if link.name.hasPrefix("wl") { return Found(kind: .wifi, by: "name:wl") }
        if link.name.hasPrefix("ww") { return Found(kind: .wwan, by: "name:ww") }
        return Found(kind: .other, by: "fallback")
    }

    /// PPP is cellular only over a modem's serial port; PPPoE is the wired line it runs on; L2TP and PPTP (a pty)
    /// are tunnels. Unknown channels stay wwan, the costlier guess.
    static func ppp(_ channel: PPPChannel?) -> Found {
        switch channel {
        case .tty?: return Found(kind: .wwan, by: "ppp:tty")
        case .pppoe?: return Found(kind: .ethernet, by: "ppp:pppoe")
        case .l2tp?: return Found(kind: .other, by: "ppp:l2tp")
        case .pty?: return Found(kind: .other, by: "ppp:pty")
        case nil: return Found(kind: .wwan, by: "arphrd:ppp")
        }
    }

    /// The kind tethering links get: a phone's or a HiLink stick's uplink is usually cellular (docs/CLASSIFICATION.md).
    public static let tetheringKind = LinkKind.wwan

    /// Names the modem drivers give their links: Qualcomm rmnet, MediaTek ccmni, the WWAN framework's wwan%d.
    public static let modemNamePrefixes = ["rmnet", "ccmni", "wwan"]

    /// rtnl kinds of links that are not hardware: tunnels, stacked and software links. A tunnel (tun, wireguard,
    /// ovpn) is ARPHRD_NONE like a cellular modem, but it is not cellular, so these are excluded from the ARPHRD
    /// none/raw-ip rule. `tap` is absent on purpose: tap devices report kind `tun`.
    public static let virtualKinds: Set<String> = [
        "veth", "bridge", "tun", "wireguard", "bond", "vlan", "macvlan", "macvtap", "ipvlan", "ipvtap", "vxlan",
        "gre", "gretap", "ip6gre", "ip6gretap", "erspan", "ip6erspan", "ipip", "sit", "ip6tnl", "vti", "vti6",
        "dummy", "vrf", "team", "geneve", "bareudp", "amt", "gtp", "ovpn", "ovpn-dco", "openvswitch", "ifb",
        "nlmon", "xfrm", "batadv", "hsr", "netkit",
    ]
}
