import CNetlink
import Glibc
import NetpermCore
import NetpermIO

/// A libnl error, as libnl numbers and words it (its codes are not errnos).
public struct NetlinkError: Error, CustomStringConvertible {
    public let code: Int32
    public let operation: String
    public var description: String { "\(operation): \(String(cString: nl_geterror(code)))" }
}

/// Watches the kernel's links, addresses, routes, rules and nexthops, fed from the daemon's event loop.
///
/// Messages are never applied to a model of the kernel: each only marks what it touches out of date, and the
/// picture is read again from the kernel itself. Links and addresses by a dump; routes by asking the kernel where
/// traffic would go (`RouteLookup`), once per family and once per link, so the answer is the FIB's own (rules,
/// tables, types, metrics, linkdown, multipath, nexthop objects, and the routes the kernel drops without saying
/// so) and costs the same with 100,000 routes as with one. A burst of messages costs one reading.
public final class NetlinkWatcher {
    /// Subscribed to the rtnetlink groups; only told that something changed.
    private let events: OpaquePointer
    /// Dumps and lookups, one request at a time.
    private let queries: OpaquePointer
    private var source: IOSource?

    private var dirtyLinks = true, dirtyAddresses = true, dirtyRoutes = true
    private var dirty: Bool { dirtyLinks || dirtyAddresses || dirtyRoutes }
    private var last = KernelSnapshot()
    /// Receive-buffer overruns (ENOBUFS): messages were lost, so everything is read again.
    public private(set) var overruns = 0

    public var onChange: ((KernelSnapshot) -> Void)?

    /// Storms. The picture goes out as soon as its messages are read, up to `burst` times in a row faster than
    /// one per `interval`; past that, a storm's messages are gathered and the picture goes out once per
    /// `interval` (the changes from the last one, so events still mean change). A lone change (2-3 messages)
    /// is never delayed; 10,000 toggles in a burst cost a few hundred readings and events instead of one or
    /// more per toggle, and the picture is the kernel's within `interval` of the storm's last message.
    static let burst = 16.0
    static let intervalMicroseconds: UInt64 = 2000
    private var tokens = burst
    private var tokensAt: UInt64 = 0
    private var pending: TimerSource?
    private let loop: EventLoop

    /// The groups whose messages can change the picture.
    private static let groups: [rtnetlink_groups] = [
        RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE,
        RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE, RTNLGRP_NEXTHOP,
    ]

    /// `receiveBuffer`: SO_RCVBUF of the event socket. Small values force overruns in tests.
    public init(loop: EventLoop, receiveBuffer: Int32 = 4 << 20) throws(NetlinkError) {
        self.loop = loop
        guard let e = nl_socket_alloc(), let q = nl_socket_alloc() else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "allocating netlink sockets")
        }
        events = e
        queries = q
        // Events are not replies: no sequence numbers to check.
        nl_socket_disable_seq_check(events)
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        try check(nl_socket_modify_cb(events, NL_CB_VALID, NL_CB_CUSTOM, { msg, arg in
            guard let msg, let arg else { return Int32(NL_OK.rawValue) }
            Unmanaged<NetlinkWatcher>.fromOpaque(arg).takeUnretainedValue().touched(nlmsg_hdr(msg).pointee.nlmsg_type)
            return Int32(NL_OK.rawValue)
        }, ctx), "setting the event callback")
        try check(nl_connect(events, NETLINK_ROUTE), "connecting the event socket")
        for g in Self.groups { try check(nl_socket_add_membership(events, Int32(g.rawValue)), "joining group \(g.rawValue)") }
        try check(nl_socket_set_nonblocking(events), "making the event socket non-blocking")
        try check(nl_connect(queries, NETLINK_ROUTE), "connecting the query socket")
        // Lookups are answered by their reply or an error; an acknowledgement on top would only linger.
        nl_socket_disable_auto_ack(queries)

        let fd = nl_socket_get_fd(events)
        // FORCE lets root exceed rmem_max; fall back for unprivileged runs (then rmem_max caps it).
        if (try? SocketOption.setReceiveBuffer(fd, bytes: receiveBuffer, force: true)) == nil {
            _ = try? SocketOption.setReceiveBuffer(fd, bytes: receiveBuffer, force: false)
        }
        do {
            source = try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in self.dataReady() }
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "watching the netlink socket (\(error))")
        }
    }

    deinit {
        pending?.cancel()
        source?.cancel()
        nl_socket_free(events)
        nl_socket_free(queries)
    }

    private func check(_ r: Int32, _ operation: String) throws(NetlinkError) {
        guard r >= 0 else { throw NetlinkError(code: r, operation: operation) }
    }

    /// Called for every message: keep it cheap. Anything can move a route (a link going down, an address going
    /// away drops routes without a message of their own), so everything marks the routes.
    private func touched(_ type: UInt16) {
        switch Int32(type) {
        case Int32(RTM_NEWLINK), Int32(RTM_DELLINK): dirtyLinks = true
        case Int32(RTM_NEWADDR), Int32(RTM_DELADDR): dirtyAddresses = true
        default: break
        }
        dirtyRoutes = true
    }

    private func dataReady() {
        while true {
            let r = nl_recvmsgs_default(events)
            if r >= 0 { continue }
            if r == -NLE_AGAIN { break }
            if r == -NLE_NOMEM {
                // The kernel's ENOBUFS: messages were lost, so nothing is known to be current.
                overruns += 1
                Log.warning("netlink: \(NetlinkError(code: r, operation: "reading events")); reading everything again")
                dirtyLinks = true
                dirtyAddresses = true
                dirtyRoutes = true
                continue
            }
            Log.err("netlink: \(NetlinkError(code: r, operation: "reading events"))")
            break
        }
        guard dirty else { return }
        refill()
        if tokens >= 1 {
            // Due (also when a storm's next message comes after its interval, ahead of the timer).
            pending?.cancel()
            pending = nil
            tokens -= 1
            deliver()
            return
        }
        guard pending == nil else { return }
        // A storm: gather until a token is there again.
        let wait = UInt64((1 - tokens) * Double(Self.intervalMicroseconds)) + 1
        do {
            pending = try loop.addTimer(afterMicroseconds: wait) { [unowned self] in
                self.pending = nil
                self.refill()
                self.tokens = max(0, self.tokens - 1)
                self.deliver()
            }
        } catch {
            deliver()
        }
    }

    private func refill() {
        let now = Clock.monotonicMicroseconds()
        if tokensAt != 0 {
            tokens = min(Self.burst, tokens + Double(now &- tokensAt) / Double(Self.intervalMicroseconds))
        }
        tokensAt = now
    }

    private func deliver() {
        guard dirty else { return }
        onChange?(snapshot())
    }

    /// The kernel's picture now; only what changed since the last one is read again.
    public func snapshot() -> KernelSnapshot {
        if dirtyLinks { last.links = (try? links()) ?? last.links }
        if dirtyAddresses { last.addresses = (try? addresses()) ?? last.addresses }
        if dirtyLinks || dirtyAddresses || dirtyRoutes { routes() }
        dirtyLinks = false
        dirtyAddresses = false
        dirtyRoutes = false
        return last
    }

    private func dump(_ what: String, _ alloc: (OpaquePointer, UnsafeMutablePointer<OpaquePointer?>) -> Int32,
                      _ each: (OpaquePointer) -> Void) throws(NetlinkError) {
        var cache: OpaquePointer?
        let r = alloc(queries, &cache)
        guard r >= 0, let cache else {
            let e = NetlinkError(code: r, operation: "dumping \(what)")
            Log.err("netlink: \(e)")
            throw e
        }
        defer { nl_cache_free(cache) }
        var obj = nl_cache_get_first(cache)
        while let o = obj {
            each(o)
            obj = nl_cache_get_next(o)
        }
    }

    private func links() throws(NetlinkError) -> [LinkFacts] {
        var links: [LinkFacts] = []
        try dump("links", { rtnl_link_alloc_cache($0, AF_UNSPEC, $1) }) { l in
            let flags = rtnl_link_get_flags(l)
            var buf = [CChar](repeating: 0, count: 32)
            let oper = String(cString: rtnl_link_operstate2str(rtnl_link_get_operstate(l), &buf, buf.count))
            links.append(LinkFacts(
                index: rtnl_link_get_ifindex(l),
                name: rtnl_link_get_name(l).map { String(cString: $0) } ?? "",
                arphrd: rtnl_link_get_arptype(l),
                rtnlKind: rtnl_link_get_type(l).map { String(cString: $0) },
                adminUp: flags & Kernel.interfaceUp != 0,
                carrier: flags & Kernel.interfaceLowerUp != 0,
                operstate: oper))
        }
        return links
    }

    private func addresses() throws(NetlinkError) -> [AddressFacts] {
        var addresses: [AddressFacts] = []
        try dump("addresses", { rtnl_addr_alloc_cache($0, $1) }) { a in
            guard let local = rtnl_addr_get_local(a) else { return }
            let fam: AddressFamily
            switch rtnl_addr_get_family(a) {
            case AF_INET: fam = .ipv4
            case AF_INET6: fam = .ipv6
            default: return
            }
            var buf = [CChar](repeating: 0, count: 64)
            nl_addr2str(local, &buf, buf.count)
            var text = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !text.contains("/") { text += "/\(rtnl_addr_get_prefixlen(a))" }
            addresses.append(AddressFacts(index: rtnl_addr_get_ifindex(a), family: fam, text: text))
        }
        return addresses
    }

    /// Where each family's traffic goes, and which links have a default route a socket bound to them would take.
    /// A down link has no routes (the kernel removes them), so it is not asked about.
    private func routes() {
        let lookup = RouteLookup(socket: queries)
        var egress: [AddressFamily: Egress] = [:]
        var defaults: [DefaultRouteFacts] = []
        for family in AddressFamily.allCases {
            do {
                egress[family] = try lookup.lookUp(family).egress
                for link in last.links where link.adminUp {
                    if case let .route(_, 0, metric) = try lookup.lookUp(family, oif: link.index, fibMatch: true) {
                        defaults.append(DefaultRouteFacts(index: link.index, family: family, metric: metric))
                    }
                }
            } catch {
                Log.err("netlink: \(error)")
            }
        }
        last.egress = egress
        last.defaultRoutes = defaults
    }
}
