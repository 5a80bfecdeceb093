// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermCore
import NetpermIO
import NetpermProtocol

/// Mode=steer's routing rules and tables over rtnetlink (a request socket of its own): reads the main table and
/// steering's own tables and rules, and carries out a `SteeringDiff` (`ip rule` and `ip route show table N` show
/// the result).
public final class SteeringTables {
    private let queries: QuerySocket

    public init() throws(NetlinkError) {
        queries = try QuerySocket(strict: true)
    }

    /// What is in the kernel now: the main table's unicast routes through a link (the ones a table may copy), the
    /// routes of steering's tables, and steering's rules (at its priority). `only`: read just these of steering's
    /// tables and those its rules name, each (and the main table) by a dump of that table alone, so that what it
    /// costs is bounded by steering's own routes whatever the size of other tables (a router's 100,000 routes);
    /// nil: every route of every table, once, to find whatever a killed daemon left.
    public func read(only: Set<UInt32>? = nil) throws(NetlinkError) -> (main: [SteerRoute], tables: [SteerRoute], rules: [SteerRule]) {
        var main: [SteerRoute] = [], tables: [SteerRoute] = [], rules: [SteerRule] = []
        func dump(table: UInt32?) throws(NetlinkError) {
            var rtm = rtmsg()
            rtm.rtm_family = UInt8(AF_UNSPEC)
            try withUnsafeBytes(of: &rtm) { b throws(NetlinkError) in
                try queries.request(type: Int32(RTM_GETROUTE), flags: NLM_F_DUMP, body: b, attributes: { m in
                    if let table { m.attribute(UInt16(RTA_TABLE.rawValue), u32: table) }
                }) { h in
                    // Filtered by the kernel, and here again (a kernel that ignores the filter dumps everything).
                    guard Int32(h.pointee.nlmsg_type) == Int32(RTM_NEWROUTE), let r = Self.route(h),
                          table == nil || r.table == table else { return .more }
                    if r.table == UInt32(RT_TABLE_MAIN.rawValue) {
                        if r.kind == .unicast, r.oif != nil { main.append(r) }
                    } else if SteeringPlan.isSteeringTable(r.table) {
                        tables.append(r)
                    }
                    return .more
                }
            }
        }
        var frh = fib_rule_hdr()
        frh.family = UInt8(AF_UNSPEC)
        try withUnsafeBytes(of: &frh) { b throws(NetlinkError) in
            try queries.request(type: Int32(RTM_GETRULE), flags: NLM_F_DUMP, body: b) { h in
                guard Int32(h.pointee.nlmsg_type) == Int32(RTM_NEWRULE), let r = Self.rule(h) else { return .more }
                rules.append(r)
                return .more
            }
        }
        if let only {
            try dump(table: UInt32(RT_TABLE_MAIN.rawValue))
            for t in only.union(rules.map(\.table)).filter(SteeringPlan.isSteeringTable).sorted() { try dump(table: t) }
        } else {
            try dump(table: nil)
        }
        return (main, tables, rules)
    }

    /// Adds first, removes last (SteeringDiff's order). An add that finds its route or rule there already, or a
    /// delete that finds it gone, is not an error (another change raced this one); the first other error stops.
    public func apply(_ diff: SteeringDiff) throws(NetlinkError) {
        for r in diff.addRoutes { try route(r, add: true) }
        for r in diff.addRules { try rule(r, add: true) }
        for r in diff.deleteRules { try rule(r, add: false) }
        for r in diff.deleteRoutes { try route(r, add: false) }
    }

    private func route(_ r: SteerRoute, add: Bool) throws(NetlinkError) {
        var rtm = rtmsg()
        rtm.rtm_family = UInt8(r.family == .ipv4 ? AF_INET : AF_INET6)
        rtm.rtm_dst_len = r.prefixLength
        rtm.rtm_table = UInt8(RT_TABLE_UNSPEC.rawValue)
        rtm.rtm_protocol = UInt8(RTPROT_STATIC)
        rtm.rtm_scope = r.scope
        rtm.rtm_type = UInt8(r.kind == .unreachable ? RTN_UNREACHABLE : RTN_UNICAST)
        let flags = add ? NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL : NLM_F_ACK
        do throws(NetlinkError) {
            try withUnsafeBytes(of: &rtm) { b throws(NetlinkError) in
                try queries.request(type: Int32(add ? RTM_NEWROUTE : RTM_DELROUTE), flags: flags, body: b, attributes: { m in
                    m.attribute(UInt16(RTA_TABLE.rawValue), u32: r.table)
                    if r.prefixLength > 0 { m.attribute(UInt16(RTA_DST.rawValue), bytes: r.destination) }
                    if let oif = r.oif { m.attribute(UInt16(RTA_OIF.rawValue), u32: UInt32(bitPattern: oif)) }
                    if let g = r.gateway { m.attribute(UInt16(RTA_GATEWAY.rawValue), bytes: g) }
                    if let s = r.source { m.attribute(UInt16(RTA_PREFSRC.rawValue), bytes: s) }
                    m.attribute(UInt16(RTA_PRIORITY.rawValue), u32: r.metric)
                }) { _ in .more }
            }
        } catch where error.errno == (add ? EEXIST : ESRCH) {}
    }

    private func rule(_ r: SteerRule, add: Bool) throws(NetlinkError) {
        var frh = fib_rule_hdr()
        frh.family = UInt8(r.family == .ipv4 ? AF_INET : AF_INET6)
        frh.action = UInt8(FR_ACT_TO_TBL)
        frh.table = UInt8(RT_TABLE_UNSPEC.rawValue)
        let source = r.source.flatMap { Self.bytes($0, r.family) }
        if let source { frh.src_len = UInt8(source.count * 8) }
        let flags = add ? NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL : NLM_F_ACK
        do throws(NetlinkError) {
            try withUnsafeBytes(of: &frh) { b throws(NetlinkError) in
                try queries.request(type: Int32(add ? RTM_NEWRULE : RTM_DELRULE), flags: flags, body: b, attributes: { m in
                    m.attribute(UInt16(FRA_PRIORITY), u32: r.priority)
                    if let source { m.attribute(UInt16(FRA_SRC), bytes: source) }
                    m.attribute(UInt16(FRA_FWMARK), u32: r.mark)
                    m.attribute(UInt16(FRA_FWMASK), u32: 0xFFFF_FFFF)
                    m.attribute(UInt16(FRA_TABLE), u32: r.table)
                }) { _ in .more }
            }
        } catch where error.errno == (add ? EEXIST : ENOENT) {}
    }

    /// A route message as steering compares routes: unicast or unreachable, single link; others are nil.
    static func route(_ h: UnsafeMutablePointer<nlmsghdr>) -> SteerRoute? {
        guard nlmsg_valid_hdr(h, Int32(MemoryLayout<rtmsg>.size)) != 0 else { return nil }
        let m = nlmsg_data(h).assumingMemoryBound(to: rtmsg.self).pointee
        let family: AddressFamily
        switch Int32(m.rtm_family) {
        case AF_INET: family = .ipv4
        case AF_INET6: family = .ipv6
        default: return nil
        }
        let kind: SteerRoute.Kind
        switch UInt32(m.rtm_type) {
        case UInt32(RTN_UNICAST): kind = .unicast
        case UInt32(RTN_UNREACHABLE): kind = .unreachable
        default: return nil
        }
        guard m.rtm_flags & UInt32(RTM_F_CLONED) == 0 else { return nil }
        var table = UInt32(m.rtm_table), dst = [UInt8](repeating: 0, count: family == .ipv4 ? 4 : 16)
        var oif: Int32?, gateway: [UInt8]?, source: [UInt8]?, metric: UInt32 = 0, multipath = false
        var attr = nlmsg_attrdata(h, Int32(MemoryLayout<rtmsg>.size))
        var left = nlmsg_attrlen(h, Int32(MemoryLayout<rtmsg>.size))
        func bytes(_ a: UnsafeMutablePointer<nlattr>) -> [UInt8] {
            Array(UnsafeRawBufferPointer(start: nla_data(a), count: Int(nla_len(a))))
        }
        while let a = attr, nla_ok(a, left) != 0 {
            switch UInt32(nla_type(a)) {
            case RTA_TABLE.rawValue: table = nla_get_u32(a)
            case RTA_DST.rawValue: dst = bytes(a)
            case RTA_OIF.rawValue: oif = Int32(bitPattern: nla_get_u32(a))
            case RTA_GATEWAY.rawValue: gateway = bytes(a)
            case RTA_PREFSRC.rawValue: source = bytes(a)
            case RTA_PRIORITY.rawValue: metric = nla_get_u32(a)
            case RTA_MULTIPATH.rawValue: multipath = true
            default: break
            }
            attr = nla_next(a, &left)
        }
        // Multipath routes are not copied (docs/ENFORCEMENT.md); an IPv6 unreachable route reports `lo`.
        guard !multipath else { return nil }
        if kind == .unreachable { oif = nil }
        return SteerRoute(family: family, table: table, kind: kind, destination: dst, prefixLength: m.rtm_dst_len,
                          oif: oif, gateway: gateway, source: source, metric: metric, scope: m.rtm_scope)
    }

    /// An address's bytes (inet_pton), nil for text that is none of `family`'s.
    static func bytes(_ text: String, _ family: AddressFamily) -> [UInt8]? {
        var b = [UInt8](repeating: 0, count: family == .ipv4 ? 4 : 16)
        return inet_pton(family == .ipv4 ? AF_INET : AF_INET6, text, &b) == 1 ? b : nil
    }

    /// Steering's rules: at its priorities, a mark, a table, and for a source rule one address.
    static func rule(_ h: UnsafeMutablePointer<nlmsghdr>) -> SteerRule? {
        guard nlmsg_valid_hdr(h, Int32(MemoryLayout<fib_rule_hdr>.size)) != 0 else { return nil }
        let f = nlmsg_data(h).assumingMemoryBound(to: fib_rule_hdr.self).pointee
        let family: AddressFamily
        switch Int32(f.family) {
        case AF_INET: family = .ipv4
        case AF_INET6: family = .ipv6
        default: return nil
        }
        var table = UInt32(f.table), priority: UInt32 = 0, mark: UInt32?, source: String?
        var attr = nlmsg_attrdata(h, Int32(MemoryLayout<fib_rule_hdr>.size))
        var left = nlmsg_attrlen(h, Int32(MemoryLayout<fib_rule_hdr>.size))
        while let a = attr, nla_ok(a, left) != 0 {
            switch UInt32(nla_type(a)) {
            case UInt32(FRA_TABLE): table = nla_get_u32(a)
            case UInt32(FRA_PRIORITY): priority = nla_get_u32(a)
            case UInt32(FRA_FWMARK): mark = nla_get_u32(a)
            case UInt32(FRA_SRC):
                source = KernelTables.text(Array(UnsafeRawBufferPointer(start: nla_data(a), count: Int(nla_len(a)))), family)
            default: break
            }
            attr = nla_next(a, &left)
        }
        guard let mark else { return nil }
        switch priority {
        case SteeringPlan.rulePriority: return source == nil ? SteerRule(family: family, mark: mark, table: table) : nil
        case SteeringPlan.sourceRulePriority:
            guard let source, Int(f.src_len) == (family == .ipv4 ? 32 : 128) else { return nil }
            return SteerRule(family: family, mark: mark, table: table, source: source)
        default: return nil
        }
    }
}
