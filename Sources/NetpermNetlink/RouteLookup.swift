// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermCore
import NetpermIO
import NetpermProtocol

/// Asks the kernel where traffic would go, as `ip route get` does (RTM_GETROUTE): the answer honours rules,
/// tables, route types, metrics and linkdown, and costs the same however many routes there are.
struct RouteLookup {
    /// The destination asked about for each family: an internet address, as `ip route get 1.1.1.1` is the usual
    /// question. A more specific route for it (a full table has one) is where its traffic goes too.
    static let probes: [AddressFamily: [UInt8]] = [
        .ipv4: [1, 1, 1, 1],
        .ipv6: [0x26, 0x06, 0x47, 0x00, 0x47, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x11],
    ]

    /// What the kernel answered.
    enum Answer: Equatable {
        /// The route used: its output interface (nil for a multipath entry's own record), prefix length, metric.
        case route(oif: Int32?, prefixLength: UInt8, metric: UInt32)
        /// An errno: ENETUNREACH (no route), EHOSTUNREACH (unreachable), EINVAL (blackhole), EACCES (prohibit)...
        case failed(Int32)
    }

    private let queries: QuerySocket

    init(_ queries: QuerySocket) {
        self.queries = queries
    }

    /// With `fibMatch` the answer is the table entry itself: with an output interface set it exists only if a
    /// route through that link covers the probe (without it, the kernel would assume the probe on-link and answer
    /// anyway).
    /// One question: `ip route get PROBE [oif LINK] [fibmatch]`.
    /// `destination`: another address than the family's probe (a tunnel's endpoint), 4 or 16 bytes.
    struct Question {
        var family: AddressFamily
        var oif: Int32? = nil
        var fibMatch = false
        var destination: [UInt8]? = nil
        /// `mark M`: as a socket with that mark (Mode=steer's marked sockets).
        var mark: UInt32? = nil
        /// `uid U`: as a socket of that uid (rules by uid range).
        var uid: UInt32? = nil
    }

    /// Asks all `questions` at once (one datagram out); the answers come in the same order.
    func lookUp(_ questions: [Question]) throws(NetlinkError) -> [Answer] {
        var answers = [Answer](repeating: .failed(0), count: questions.count)
        try queries.exchange(count: questions.count, type: Int32(RTM_GETROUTE), build: { i, m in
            let q = questions[i]
            let address = q.destination ?? Self.probes[q.family]!
            var rtm = rtmsg()
            rtm.rtm_family = UInt8(q.family == .ipv4 ? AF_INET : AF_INET6)
            rtm.rtm_dst_len = UInt8(address.count * 8)
            if q.fibMatch { rtm.rtm_flags = UInt32(RTM_F_FIB_MATCH) }
            m.append(header: rtm)
            m.attribute(UInt16(RTA_DST.rawValue), bytes: address)
            if let mark = q.mark { m.attribute(UInt16(RTA_MARK.rawValue), u32: mark) }
            if let uid = q.uid { m.attribute(UInt16(RTA_UID.rawValue), u32: uid) }
            if let oif = q.oif { m.attribute(UInt16(RTA_OIF.rawValue), u32: UInt32(bitPattern: oif)) }
        }) { i, h in
            switch Int32(h.pointee.nlmsg_type) {
            case NLMSG_ERROR:
                answers[i] = .failed(-nlmsg_data(h).assumingMemoryBound(to: nlmsgerr.self).pointee.error)
            case Int32(RTM_NEWROUTE):
                answers[i] = parse(h)
            default:
                answers[i] = .failed(EPROTO)
            }
        }
        return answers
    }

    /// Host routes (/32, /128) of unicast type outside the local table, as a route dump lists them: the
    /// destinations VPN clients route to their server. At most `limit`: a router with a full table is no
    /// machine a userspace VPN's carrier is guessed on.
    func hostRoutes(limit: Int = 64) throws(NetlinkError) -> [(destination: [UInt8], oif: Int32)] {
        var found: [(destination: [UInt8], oif: Int32)] = []
        var rtm = rtmsg()
        rtm.rtm_family = UInt8(AF_UNSPEC)
        try withUnsafeBytes(of: &rtm) { b throws(NetlinkError) in
            try queries.request(type: Int32(RTM_GETROUTE), flags: NLM_F_DUMP, body: b) { h in
                guard Int32(h.pointee.nlmsg_type) == Int32(RTM_NEWROUTE), found.count < limit,
                      nlmsg_valid_hdr(h, Int32(MemoryLayout<rtmsg>.size)) != 0 else { return .more }
                let r = nlmsg_data(h).assumingMemoryBound(to: rtmsg.self).pointee
                let full: UInt8 = r.rtm_family == UInt8(AF_INET) ? 32 : 128
                guard r.rtm_family == UInt8(AF_INET) || r.rtm_family == UInt8(AF_INET6), r.rtm_dst_len == full,
                      r.rtm_type == UInt8(RTN_UNICAST), r.rtm_flags & UInt32(RTM_F_CLONED) == 0 else { return .more }
                var table = UInt32(r.rtm_table), dst: [UInt8]?, oif: Int32?
                var attr = nlmsg_attrdata(h, Int32(MemoryLayout<rtmsg>.size))
                var left = nlmsg_attrlen(h, Int32(MemoryLayout<rtmsg>.size))
                while let a = attr, nla_ok(a, left) != 0 {
                    switch UInt32(nla_type(a)) {
                    case RTA_TABLE.rawValue: table = nla_get_u32(a)
                    case RTA_DST.rawValue: dst = Array(UnsafeRawBufferPointer(start: nla_data(a), count: Int(nla_len(a))))
                    case RTA_OIF.rawValue: oif = Int32(bitPattern: nla_get_u32(a))
                    default: break
                    }
                    attr = nla_next(a, &left)
                }
                if table != UInt32(RT_TABLE_LOCAL.rawValue), let dst, dst.count == Int(full) / 8, let oif {
                    found.append((dst, oif))
                }
                return .more
            }
        }
        return found
    }

    private func parse(_ h: UnsafeMutablePointer<nlmsghdr>) -> Answer {
        let rtm = nlmsg_data(h).assumingMemoryBound(to: rtmsg.self).pointee
        var oif: Int32?
        var metric: UInt32 = 0
        var attr = nlmsg_attrdata(h, Int32(MemoryLayout<rtmsg>.size))
        var left = nlmsg_attrlen(h, Int32(MemoryLayout<rtmsg>.size))
        while let a = attr, nla_ok(a, left) != 0 {
            switch UInt32(nla_type(a)) {
            case RTA_OIF.rawValue: oif = Int32(bitPattern: nla_get_u32(a))
            case RTA_PRIORITY.rawValue: metric = nla_get_u32(a)
            default: break
            }
            attr = nla_next(a, &left)
        }
        return .route(oif: oif, prefixLength: rtm.rtm_dst_len, metric: metric)
    }

}

extension RouteLookup.Answer {
    /// The egress this answer means for the family's traffic, or nil for no route.
    var egress: Egress? {
        switch self {
        case let .route(oif?, _, _): return .link(oif)
        case .route(nil, _, _): return nil
        case .failed(EINVAL): return .blocked(.blackhole)
        case .failed(EHOSTUNREACH): return .blocked(.unreachable)
        case .failed(EACCES): return .blocked(.prohibit)
        case .failed: return nil
        }
    }
}
