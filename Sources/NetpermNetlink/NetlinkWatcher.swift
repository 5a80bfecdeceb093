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

/// Watches links, addresses and routes with libnl's cache manager, fed from the daemon's event loop.
/// After each batch of netlink messages that changed a cache it hands the whole picture to `onChange`,
/// so a burst of messages costs one rebuild, and the picture is always the caches' (hence the kernel's).
public final class NetlinkWatcher {
    private var manager: OpaquePointer?
    private var linkCache: OpaquePointer?
    private var addrCache: OpaquePointer?
    private var routeCache: OpaquePointer?
    /// A second socket for full dumps (resync); the manager's own socket only receives events.
    private var syncSocket: OpaquePointer?
    private var source: IOSource?

    /// Which caches changed since the last picture: the others' part of it is reused (formatting every address
    /// again cost more than the rest of a link toggle's snapshot).
    private var dirtyLinks = false, dirtyAddresses = false, dirtyRoutes = false
    private var dirty: Bool { dirtyLinks || dirtyAddresses || dirtyRoutes }
    private var last = KernelSnapshot()
    /// Events were lost (ENOBUFS) or a link was removed: every cache is re-dumped.
    private var needsResync = false
    /// A link went down: the kernel flushed its IPv4 routes without telling listeners, so the route cache is
    /// re-dumped. Its link and address changes come as messages; dumping those caches too cost a toggle more than
    /// everything else the daemon does for it.
    private var needsRouteResync = false
    public private(set) var resyncCount = 0

    public var onChange: ((KernelSnapshot) -> Void)?

    /// Storms. The picture goes out as soon as its messages are read, up to `burst` times in a row faster than
    /// one per `interval`; past that, a storm's messages are gathered and the picture goes out once per
    /// `interval` (the changes from the last one, so events still mean change). A lone change (2-3 messages)
    /// is never delayed; 10,000 toggles in a burst cost a few hundred rebuilds and events instead of one or
    /// more per toggle, and the picture is the kernel's within `interval` of the storm's last message.
    static let burst = 16.0
    static let intervalMicroseconds: UInt64 = 2000
    private var tokens = burst
    private var tokensAt: UInt64 = 0
    private var pending: TimerSource?
    private let loop: EventLoop

    /// `receiveBuffer`: SO_RCVBUF of the event socket. Small values force overruns in tests.
    public init(loop: EventLoop, receiveBuffer: Int32 = 4 << 20) throws(NetlinkError) {
        self.loop = loop
        var mngr: OpaquePointer?
        try check(nl_cache_mngr_alloc(nil, NETLINK_ROUTE, Int32(NL_AUTO_PROVIDE), &mngr), "allocating the cache manager")
        manager = mngr
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        let callback: change_func_t = { cache, object, action, data in
            guard let data else { return }
            Unmanaged<NetlinkWatcher>.fromOpaque(data).takeUnretainedValue().changed(cache, object, action: action)
        }
        // Adding a cache dumps it at once: when init returns, the picture is complete.
        try check(nl_cache_mngr_add(mngr, "route/link", callback, ctx, &linkCache), "dumping links")
        try check(nl_cache_mngr_add(mngr, "route/addr", callback, ctx, &addrCache), "dumping addresses")
        try check(nl_cache_mngr_add(mngr, "route/route", callback, ctx, &routeCache), "dumping routes")

        let sk = nl_socket_alloc()
        try check(nl_connect(sk, NETLINK_ROUTE), "connecting the resync socket")
        syncSocket = sk

        let fd = nl_cache_mngr_get_fd(mngr)
        // FORCE lets root exceed rmem_max; fall back for unprivileged runs (then rmem_max caps it).
        if (try? SocketOption.setReceiveBuffer(fd, bytes: receiveBuffer, force: true)) == nil {
            _ = try? SocketOption.setReceiveBuffer(fd, bytes: receiveBuffer, force: false)
        }
        do {
            source = try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in self.dataReady() }
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "watching the netlink socket (\(error))")
        }
        // The first picture reads every cache.
        dirtyLinks = true
        dirtyAddresses = true
        dirtyRoutes = true
        needsResync = false
        needsRouteResync = false
    }

    deinit {
        pending?.cancel()
        source?.cancel()
        if let manager { nl_cache_mngr_free(manager) }
        if let syncSocket { nl_socket_free(syncSocket) }
    }

    private func check(_ r: Int32, _ operation: String) throws(NetlinkError) {
        guard r >= 0 else { throw NetlinkError(code: r, operation: operation) }
    }

    /// Called for every netlink message that changed a cache: keep it cheap (no strings).
    private func changed(_ cache: OpaquePointer?, _ object: OpaquePointer?, action: Int32) {
        markDirty(cache)
        guard let object, cache == linkCache else { return }
        if action == NL_ACT_DEL {
            needsResync = true
        } else if rtnl_link_get_flags(object) & Kernel.interfaceUp == 0 {
            needsRouteResync = true
        }
    }

    private func dataReady() {
        var r = nl_cache_mngr_data_ready(manager)
        while r < 0 && r != -NLE_AGAIN {
            // -NLE_NOMEM is the kernel's ENOBUFS: events were lost, so the caches must be re-dumped. The
            // kernel reports the loss before the events still queued, which are older than the loss: read
            // them all first, so that the dump below comes last and has the final word.
            Log.warning("netlink: \(NetlinkError(code: r, operation: "reading events")); resynchronising from a full dump")
            needsResync = true
            r = nl_cache_mngr_data_ready(manager)
        }
        guard dirty || needsResync || needsRouteResync else { return }
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

    /// Brings the caches up to date where the kernel stays silent, and hands the picture on if it changed.
    private func deliver() {
        if needsResync {
            resync([linkCache, addrCache, routeCache])
        } else if needsRouteResync {
            resync([routeCache])
        }
        if dirty { onChange?(snapshot()) }
    }

    private func resync(_ caches: [OpaquePointer?]) {
        needsResync = false
        needsRouteResync = false
        resyncCount += 1
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        let callback: change_func_t = { cache, _, _, data in
            guard let data else { return }
            Unmanaged<NetlinkWatcher>.fromOpaque(data).takeUnretainedValue().markDirty(cache)
        }
        for cache in caches {
            let r = nl_cache_resync(syncSocket, cache, callback, ctx)
            if r < 0 { Log.err("netlink: \(NetlinkError(code: r, operation: "resync"))") }
        }
    }

    private func markDirty(_ cache: OpaquePointer?) {
        if cache == linkCache { dirtyLinks = true } else if cache == addrCache { dirtyAddresses = true } else { dirtyRoutes = true }
    }

    /// The caches as one consistent picture; only the parts whose cache changed are read again.
    public func snapshot() -> KernelSnapshot {
        if dirtyLinks { last.links = links() }
        if dirtyAddresses { last.addresses = addresses() }
        if dirtyRoutes { last.defaultRoutes = defaultRoutes() }
        dirtyLinks = false
        dirtyAddresses = false
        dirtyRoutes = false
        return last
    }

    private func links() -> [LinkFacts] {
        var links: [LinkFacts] = []
        // The cache can hold per-family objects (AF_INET6/AF_BRIDGE protinfo) next to a link's AF_UNSPEC one,
        // and an AF_BRIDGE message can also take the AF_UNSPEC object's place (a bridge created while we run
        // is then only there as AF_BRIDGE, with its kind): one object per ifindex, AF_UNSPEC preferred.
        var chosen: [Int32: OpaquePointer] = [:]
        forEach(linkCache) { l in
            let index = rtnl_link_get_ifindex(l)
            if chosen[index] == nil || rtnl_link_get_family(l) == AF_UNSPEC { chosen[index] = l }
        }
        for l in chosen.values {
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

    private func addresses() -> [AddressFacts] {
        var addresses: [AddressFacts] = []
        forEach(addrCache) { a in
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

    /// Default routes (prefix length 0, main table, unicast), one per nexthop.
    private func defaultRoutes() -> [DefaultRouteFacts] {
        var routes: [DefaultRouteFacts] = []
        forEach(routeCache) { r in
            guard rtnl_route_get_table(r) == UInt32(RT_TABLE_MAIN.rawValue),
                  rtnl_route_get_type(r) == UInt8(RTN_UNICAST),
                  let dst = rtnl_route_get_dst(r), nl_addr_get_prefixlen(dst) == 0 else { return }
            let fam: AddressFamily
            switch Int32(rtnl_route_get_family(r)) {
            case AF_INET: fam = .ipv4
            case AF_INET6: fam = .ipv6
            default: return
            }
            let metric = rtnl_route_get_priority(r)
            for i in 0..<rtnl_route_get_nnexthops(r) {
                guard let nh = rtnl_route_nexthop_n(r, i) else { continue }
                routes.append(DefaultRouteFacts(index: rtnl_route_nh_get_ifindex(nh), family: fam, metric: metric))
            }
        }
        return routes
    }

    private func forEach(_ cache: OpaquePointer?, _ body: (OpaquePointer) -> Void) {
        var obj = nl_cache_get_first(cache)
        while let o = obj {
            body(o)
            obj = nl_cache_get_next(o)
        }
    }
}
