// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermCore
import NetpermIO
import NetpermProtocol

/// Links and addresses as their rtnetlink messages say, whether the messages came from a dump or as events: one
/// parser for both, so an address a dump listed is the one its deletion names.
struct KernelTables {
    /// An address as the kernel identifies it: on one link, its local address, prefix length and peer. Two
    /// addresses can share the text netpermd reports (10.0.0.1/32 with two peers); deleting one keeps the other.
    struct AddressKey: Hashable {
        let index: Int32
        let local: [UInt8]
        let prefixLength: UInt8
        let peer: [UInt8]
    }

    var links: [Int32: LinkFacts] = [:]
    var addresses: [AddressKey: AddressFacts] = [:]

    /// Applies one RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR or RTM_DELADDR; returns whether it was one of those.
    /// A bridge's messages about its ports (AF_BRIDGE) say nothing of the link itself (a port leaving its bridge
    /// gets an RTM_DELLINK of that family while the link stays), so they are skipped.
    mutating func apply(_ h: UnsafeMutablePointer<nlmsghdr>) -> Bool {
        let type = Int32(h.pointee.nlmsg_type)
        switch type {
        case Int32(RTM_NEWLINK), Int32(RTM_DELLINK):
            guard nlmsg_valid_hdr(h, Int32(MemoryLayout<ifinfomsg>.size)) != 0 else { return false }
            let info = nlmsg_data(h).assumingMemoryBound(to: ifinfomsg.self).pointee
            guard info.ifi_family != UInt8(AF_BRIDGE) else { return false }
            if type == Int32(RTM_DELLINK) {
                links[info.ifi_index] = nil
                addresses = addresses.filter { $0.key.index != info.ifi_index }
            } else {
                links[info.ifi_index] = Self.link(h, info)
            }
            return true
        case Int32(RTM_NEWADDR), Int32(RTM_DELADDR):
            guard nlmsg_valid_hdr(h, Int32(MemoryLayout<ifaddrmsg>.size)) != 0,
                  let (key, address) = Self.address(h) else { return false }
            addresses[key] = type == Int32(RTM_NEWADDR) ? address : nil
            return true
        default:
            return false
        }
    }

    /// Applies every message of a datagram as the socket delivered it; returns how many were links or addresses.
    mutating func apply(datagram: UnsafeMutableRawBufferPointer) -> Int {
        var applied = 0
        for m in NetlinkMessages(UnsafeRawBufferPointer(datagram)) {
            if apply(UnsafeMutableRawPointer(mutating: m.start).assumingMemoryBound(to: nlmsghdr.self)) { applied += 1 }
        }
        return applied
    }

    /// IFLA_INFO_DATA's remote endpoint attribute, per tunnel kind (<linux/if_tunnel.h>, not among the headers
    /// the module imports): IFLA_IPTUN_REMOTE for ipip, sit, ip6tnl; IFLA_GRE_REMOTE for the GRE family;
    /// IFLA_VTI_REMOTE for vti.
    static let remoteAttribute: [String: Int32] = [
        "ipip": 3, "sit": 3, "ip6tnl": 3,
        "gre": 7, "gretap": 7, "ip6gre": 7, "ip6gretap": 7, "erspan": 7, "ip6erspan": 7,
        "vti": 5, "vti6": 5,
    ]

    private static func link(_ h: UnsafeMutablePointer<nlmsghdr>, _ info: ifinfomsg) -> LinkFacts {
        var name = "", kind: String?, operstate: UInt8 = 0
        var lower: Int32?, master: Int32?, otherNamespace = false
        var data: UnsafeMutablePointer<nlattr>?
        each(h, header: MemoryLayout<ifinfomsg>.size) { a in
            switch Int32(nla_type(a)) {
            case Int32(IFLA_IFNAME): name = String(cString: nla_get_string(a))
            case Int32(IFLA_OPERSTATE): operstate = nla_get_u8(a)
            case Int32(IFLA_LINK): lower = Int32(bitPattern: nla_get_u32(a))
            case Int32(IFLA_MASTER): master = Int32(bitPattern: nla_get_u32(a))
            case Int32(IFLA_LINK_NETNSID): otherNamespace = true
            case Int32(IFLA_LINKINFO):
                eachNested(a) { i in
                    switch Int32(nla_type(i)) {
                    case Int32(IFLA_INFO_KIND): kind = String(cString: nla_get_string(i))
                    case Int32(IFLA_INFO_DATA): data = i
                    default: break
                    }
                }
            default: break
            }
        }
        var remote: [UInt8]?
        if let data, let kind, let wanted = remoteAttribute[kind] {
            eachNested(data) { d in
                guard Int32(nla_type(d)) == wanted else { return }
                let b = bytes(d)
                // The wildcard (a tunnel taking any remote) names no endpoint.
                if b.count == 4 || b.count == 16, b.contains(where: { $0 != 0 }) { remote = b }
            }
        }
        var buf = [CChar](repeating: 0, count: 32)
        let oper = String(cString: rtnl_link_operstate2str(operstate, &buf, buf.count))
        // IFLA_LINK names the link itself on some devices and 0 when there is none; with IFLA_LINK_NETNSID it is
        // an index in another namespace.
        let lowerIndex = lower.flatMap { $0 == 0 || $0 == info.ifi_index || otherNamespace ? nil : $0 }
        return LinkFacts(index: info.ifi_index, name: name, arphrd: UInt32(info.ifi_type), rtnlKind: kind,
                         adminUp: info.ifi_flags & Kernel.interfaceUp != 0,
                         carrier: info.ifi_flags & Kernel.interfaceLowerUp != 0, operstate: oper,
                         lowerIndex: lowerIndex, masterIndex: master.flatMap { $0 == 0 ? nil : $0 },
                         tunnelRemote: remote)
    }

    /// The address and its identity, or nil for one netpermd does not report (other families). IPv4 sends its
    /// own address as IFA_LOCAL and the peer (or the same address) as IFA_ADDRESS; IPv6 sends IFA_ADDRESS alone
    /// unless there is a peer.
    private static func address(_ h: UnsafeMutablePointer<nlmsghdr>) -> (AddressKey, AddressFacts)? {
        let ifa = nlmsg_data(h).assumingMemoryBound(to: ifaddrmsg.self).pointee
        let family: AddressFamily
        switch Int32(ifa.ifa_family) {
        case AF_INET: family = .ipv4
        case AF_INET6: family = .ipv6
        default: return nil
        }
        var local: [UInt8]?, address: [UInt8]?
        each(h, header: MemoryLayout<ifaddrmsg>.size) { a in
            switch Int32(nla_type(a)) {
            case Int32(IFA_LOCAL): local = bytes(a)
            case Int32(IFA_ADDRESS): address = bytes(a)
            default: break
            }
        }
        guard let own = local ?? address else { return nil }
        let peer = local != nil && address != local ? address ?? [] : []
        let key = AddressKey(index: Int32(ifa.ifa_index), local: own, prefixLength: ifa.ifa_prefixlen, peer: peer)
        return (key, AddressFacts(index: key.index, family: family, text: "\(text(own, family))/\(ifa.ifa_prefixlen)"))
    }

    private static func each(_ h: UnsafeMutablePointer<nlmsghdr>, header: Int, _ body: (UnsafeMutablePointer<nlattr>) -> Void) {
        var attr = nlmsg_attrdata(h, Int32(header))
        var left = nlmsg_attrlen(h, Int32(header))
        while let a = attr, nla_ok(a, left) != 0 {
            body(a)
            attr = nla_next(a, &left)
        }
    }

    private static func eachNested(_ nest: UnsafeMutablePointer<nlattr>, _ body: (UnsafeMutablePointer<nlattr>) -> Void) {
        var attr = nla_data(nest).map { $0.assumingMemoryBound(to: nlattr.self) }
        var left = nla_len(nest)
        while let a = attr, nla_ok(a, left) != 0 {
            body(a)
            attr = nla_next(a, &left)
        }
    }

    private static func bytes(_ a: UnsafeMutablePointer<nlattr>) -> [UInt8] {
        Array(UnsafeRawBufferPointer(start: nla_data(a), count: Int(nla_len(a))))
    }

    static func text(_ address: [UInt8], _ family: AddressFamily) -> String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let af = family == .ipv4 ? AF_INET : AF_INET6
        guard address.count == (family == .ipv4 ? 4 : 16), inet_ntop(af, address, &buf, socklen_t(buf.count)) != nil else {
            return address.map { String($0, radix: 16) }.joined(separator: ":")
        }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
