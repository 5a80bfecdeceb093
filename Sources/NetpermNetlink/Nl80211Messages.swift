// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import NetpermIO

/// One nl80211 message: its command and its top-level attributes (the first of each type; payloads copied).
public struct Nl80211Message: Equatable, Sendable {
    public var command: UInt8
    public var attributes: [UInt16: [UInt8]]
    public init(command: UInt8, attributes: [UInt16: [UInt8]]) { self.command = command; self.attributes = attributes }
}

/// Reads nl80211's messages from their bytes: netlink header, generic-netlink header, attributes (the layout is
/// the kernel's ABI, in host byte order). Pure, so it is tested on hand-built messages: no machine here has Wi-Fi.
/// What `iw dev X link` shows is read the same way: the SSID from the interface (NL80211_CMD_GET_INTERFACE), the
/// BSSID from the scan entry whose status is associated or IBSS-joined (NL80211_CMD_GET_SCAN).
public enum Nl80211 {
    // From <linux/nl80211.h>.
    static let cmdNewInterface = UInt8(NL80211_CMD_NEW_INTERFACE.rawValue)
    static let cmdNewScanResults = UInt8(NL80211_CMD_NEW_SCAN_RESULTS.rawValue)
    static let attrIfindex = UInt16(NL80211_ATTR_IFINDEX.rawValue)
    static let attrIftype = UInt16(NL80211_ATTR_IFTYPE.rawValue)
    static let attrSSID = UInt16(NL80211_ATTR_SSID.rawValue)
    static let attrBSS = UInt16(NL80211_ATTR_BSS.rawValue)
    static let bssBSSID = UInt16(NL80211_BSS_BSSID.rawValue)
    static let bssStatus = UInt16(NL80211_BSS_STATUS.rawValue)

    /// The commands after which a link's network may have changed: (dis)association, connect, roam, and
    /// interfaces coming, going or changing type.
    static let associationCommands: Set<UInt8> = Set([
        NL80211_CMD_CONNECT, NL80211_CMD_ROAM, NL80211_CMD_DISCONNECT, NL80211_CMD_ASSOCIATE,
        NL80211_CMD_DISASSOCIATE, NL80211_CMD_DEAUTHENTICATE, NL80211_CMD_NEW_INTERFACE, NL80211_CMD_DEL_INTERFACE,
        NL80211_CMD_SET_INTERFACE,
    ].map { UInt8($0.rawValue) })

    /// Interface types that join someone else's network (station, P2P client, IBSS): an AP's SSID is the one it
    /// serves, not the one its traffic leaves by.
    static let clientTypes: Set<UInt32> = [
        NL80211_IFTYPE_STATION.rawValue, NL80211_IFTYPE_P2P_CLIENT.rawValue, NL80211_IFTYPE_ADHOC.rawValue,
    ]

    /// The nl80211 messages (netlink type `family`) in one datagram; anything else (NLMSG_DONE, errors, other
    /// families) is skipped. A malformed message ends the walk: what follows it cannot be framed.
    public static func messages(in datagram: [UInt8], family: UInt16) -> [Nl80211Message] {
        datagram.withUnsafeBytes { b in
            NetlinkMessages(b).compactMap { m in
                guard m.type == family, m.payload.count >= MemoryLayout<genlmsghdr>.size,
                      let attrs = attributes(m.attributes(after: MemoryLayout<genlmsghdr>.size)) else { return nil }
                return Nl80211Message(command: m.payload[0], attributes: attrs)
            }
        }
    }

    /// Attributes as type (flags masked off) -> payload; nil when one overruns the bytes.
    public static func attributes(_ bytes: ArraySlice<UInt8>) -> [UInt16: [UInt8]]? {
        bytes.withUnsafeBytes { attributes(NetlinkAttributes($0)) }
    }

    private static func attributes(_ walk: NetlinkAttributes) -> [UInt16: [UInt8]]? {
        var out: [UInt16: [UInt8]] = [:]
        var w = walk
        while let a = w.next() { if out[a.type] == nil { out[a.type] = Array(a.payload) } }
        return w.malformed ? nil : out
    }

    /// An interface (answer to NL80211_CMD_GET_INTERFACE, or a NEW_INTERFACE event): its index, and its SSID when
    /// it is a client associated to a network (the kernel includes the SSID only then).
    public static func interface(_ m: Nl80211Message) -> (index: Int32, ssid: [UInt8]?)? {
        guard m.command == cmdNewInterface, let i = m.attributes[attrIfindex], i.count == 4 else { return nil }
        let index = Int32(bitPattern: u32(i))
        guard let t = m.attributes[attrIftype], t.count == 4, clientTypes.contains(u32(t)) else {
            return (index, nil)
        }
        // An SSID is 1 to 32 bytes (IEEE 802.11); anything else is not one.
        let ssid = m.attributes[attrSSID].flatMap { (1...32).contains($0.count) ? $0 : nil }
        return (index, ssid)
    }

    /// A scan entry (answer to NL80211_CMD_GET_SCAN): the interface and the BSSID, only for the BSS the interface
    /// is associated to or has joined (as `iw link` decides; an "authenticated" entry is not a link yet).
    public static func associatedBSS(_ m: Nl80211Message) -> (index: Int32, bssid: String)? {
        guard m.command == cmdNewScanResults, let i = m.attributes[attrIfindex], i.count == 4,
              let nested = m.attributes[attrBSS], let bss = attributes(nested[...]),
              let status = bss[bssStatus], status.count == 4,
              u32(status) == NL80211_BSS_STATUS_ASSOCIATED.rawValue
                || u32(status) == NL80211_BSS_STATUS_IBSS_JOINED.rawValue,
              let mac = bss[bssBSSID], let text = macText(mac) else { return nil }
        return (Int32(bitPattern: u32(i)), text)
    }

    /// "aa:bb:cc:dd:ee:ff"; nil unless 6 bytes.
    public static func macText(_ b: [UInt8]) -> String? {
        guard b.count == 6 else { return nil }
        return b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: ":")
    }

    /// A 4-byte payload (host byte order, as netlink writes it).
    static func u32(_ b: [UInt8]) -> UInt32 { b.withUnsafeBytes { Netlink.u32($0) ?? 0 } }
}
