import CNetlink
import Glibc
import NetpermCore

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

    let socket: OpaquePointer

    /// `ip route get PROBE [oif LINK] [fibmatch]`. With `fibMatch` the answer is the table entry itself: with an
    /// output interface set it exists only if a route through that link covers the probe (without it, the kernel
    /// would assume the probe on-link and answer anyway).
    func lookUp(_ family: AddressFamily, oif: Int32? = nil, fibMatch: Bool = false) throws(NetlinkError) -> Answer {
        guard let msg = nlmsg_alloc_simple(Int32(RTM_GETROUTE), 0) else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "allocating a route lookup")
        }
        defer { nlmsg_free(msg) }
        let address = Self.probes[family]!
        var rtm = rtmsg()
        rtm.rtm_family = UInt8(family == .ipv4 ? AF_INET : AF_INET6)
        rtm.rtm_dst_len = UInt8(address.count * 8)
        if fibMatch { rtm.rtm_flags = UInt32(RTM_F_FIB_MATCH) }
        try check(nlmsg_append(msg, &rtm, MemoryLayout<rtmsg>.size, Int32(NLMSG_ALIGNTO)), "building a route lookup")
        try check(address.withUnsafeBytes { nla_put(msg, Int32(RTA_DST.rawValue), Int32($0.count), $0.baseAddress) },
                  "building a route lookup")
        if let oif { try check(nla_put_u32(msg, Int32(RTA_OIF.rawValue), UInt32(bitPattern: oif)), "building a route lookup") }
        try check(nl_send_auto(socket, msg), "sending a route lookup")
        return try receive(sequence: nlmsg_hdr(msg).pointee.nlmsg_seq)
    }

    /// Reads the reply to request `sequence`: one route message, or an error message. Anything else (a late
    /// answer to an earlier request) is skipped.
    private func receive(sequence: UInt32) throws(NetlinkError) -> Answer {
        for _ in 0..<16 {
            var buffer: UnsafeMutablePointer<UInt8>?
            var from = sockaddr_nl()
            let n = nl_recv(socket, &from, &buffer, nil)
            defer { free(buffer) }
            guard n > 0, let buffer else {
                throw NetlinkError(code: n < 0 ? n : -NLE_FAILURE, operation: "reading a route lookup")
            }
            var remaining = n
            var header: UnsafeMutablePointer<nlmsghdr>? = UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: nlmsghdr.self)
            while let h = header, nlmsg_ok(h, remaining) != 0 {
                if h.pointee.nlmsg_seq == sequence {
                    switch Int32(h.pointee.nlmsg_type) {
                    case NLMSG_ERROR:
                        let e = nlmsg_data(h).assumingMemoryBound(to: nlmsgerr.self).pointee.error
                        if e != 0 { return .failed(-e) }
                    case Int32(RTM_NEWROUTE):
                        return parse(h)
                    default:
                        break
                    }
                }
                header = nlmsg_next(h, &remaining)
            }
        }
        throw NetlinkError(code: -NLE_MSG_TRUNC, operation: "reading a route lookup (no answer)")
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

    private func check(_ r: Int32, _ operation: String) throws(NetlinkError) {
        guard r >= 0 else { throw NetlinkError(code: r, operation: operation) }
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
