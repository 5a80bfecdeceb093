// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermCore
import NetpermIO
import NetpermProtocol

/// Watches the kernel's links, addresses, routes, rules and nexthops, fed from the daemon's event loop.
///
/// Links and addresses are kept as their messages leave them (read whole by a dump at start and whenever messages
/// were lost). Routes are never modelled: any message marks them out of date, and they are read again by asking
/// the kernel where traffic would go (`RouteLookup`), once per family and once per link, so the answer is the
/// FIB's own (rules, tables, types, metrics, linkdown, multipath, nexthop objects, and the routes the kernel
/// drops without saying so) and costs the same with 100,000 routes as with one. A burst of messages costs one
/// reading.
public final class NetlinkWatcher {
    /// Subscribed to the rtnetlink groups.
    private let events: OpaquePointer
    /// Dumps and lookups, one request at a time.
    private let queries: QuerySocket
    private let lookup: RouteLookup
    private var source: IOSource?
    /// One event datagram at a time (an event is one message; a link's can pass 4 KiB).
    private var datagrams = EventDatagrams()

    private var tables = KernelTables()
    /// What the last picture no longer says.
    private struct Stale {
        /// Read links and addresses again by a dump: at start, after lost messages.
        var dump = true
        /// Messages were lost: the next picture counts as a resync (`KernelSnapshot.resyncs`).
        var lost = false
        /// Links or addresses changed since the last picture.
        var tables = false
        /// Ask the kernel again where traffic goes.
        var routes = true
        var any: Bool { dump || tables || routes }
    }
    private var stale = Stale()
    private var last = KernelSnapshot()
    /// Receive-buffer overruns (ENOBUFS): messages were lost, so everything is read again.
    public private(set) var overruns = 0

    public var onChange: ((KernelSnapshot) -> Void)?

    /// Mode=steer's marks in use: where a socket with each goes is asked too (`KernelSnapshot.markedEgress`). A new
    /// set is asked about at the next picture, which the rules and tables being changed bring about anyway.
    public var marks: [UInt32] = [] {
        didSet { if marks != oldValue { stale.routes = true } }
    }

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
        guard let e = nl_socket_alloc() else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "allocating netlink sockets")
        }
        events = e
        queries = try QuerySocket()
        lookup = RouteLookup(queries)
        try check(nl_connect(events, NETLINK_ROUTE), "connecting the event socket")
        for g in Self.groups { try check(nl_socket_add_membership(events, Int32(g.rawValue)), "joining group \(g.rawValue)") }
        try check(nl_socket_set_nonblocking(events), "making the event socket non-blocking")

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
    }

    private func check(_ r: Int32, _ operation: String) throws(NetlinkError) {
        guard r >= 0 else { throw NetlinkError(code: r, operation: operation) }
    }

    /// Links and addresses are applied; every message marks the routes, any link's included: a link going
    /// away deletes, without a message, every IPv4 multipath route with a nexthop through it, and an address going
    /// away the routes by its subnet.
    private func received(_ h: UnsafeMutablePointer<nlmsghdr>) {
        if tables.apply(h) { stale.tables = true }
        stale.routes = true
    }

    /// Reads every datagram queued, without blocking.
    private func readEvents() {
        do throws(Errno) {
            try datagrams.drain(nl_socket_get_fd(events), lost: { loss in
                switch loss {
                case let .overrun(error):
                    // The kernel dropped messages: nothing is known to be current.
                    overruns += 1
                    Log.warning("netlink: reading events: \(error); reading everything again")
                case let .cut(n):
                    Log.warning("netlink: an event of \(n) bytes was cut; reading everything again")
                }
                stale.dump = true
                stale.lost = true
            }) { b in
                for m in NetlinkMessages(UnsafeRawBufferPointer(b)) {
                    received(UnsafeMutableRawPointer(mutating: m.start).assumingMemoryBound(to: nlmsghdr.self))
                }
            }
        } catch {
            Log.err("netlink: reading events: \(error)")
        }
    }

    private func dataReady() {
        readEvents()
        guard stale.any else { return }
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
        guard stale.any else { return }
        onChange?(snapshot())
    }

    /// The kernel's picture now; only what changed since the last one is read again.
    public func snapshot() -> KernelSnapshot {
        if stale.dump { dumpAll() }
        if stale.tables {
            last.links = tables.links.values.sorted { $0.index < $1.index }
            last.addresses = Array(tables.addresses.values)
        }
        routes()
        stale.tables = false
        stale.routes = false
        return last
    }

    /// Links and addresses read whole, through the same parser as their events. A dump the kernel says was
    /// interrupted by a change is read again; if it still fails, what the messages said stands and the next
    /// message tries again.
    private func dumpAll() {
        for attempt in 1...3 {
            var fresh = KernelTables()
            do {
                var link = ifinfomsg()
                link.ifi_family = UInt8(AF_UNSPEC)
                try withUnsafeBytes(of: &link) { b throws(NetlinkError) in
                    try queries.request(type: Int32(RTM_GETLINK), flags: NLM_F_DUMP, body: b) { h in
                        _ = fresh.apply(h)
                        return .more
                    }
                }
                var addr = ifaddrmsg()
                addr.ifa_family = UInt8(AF_UNSPEC)
                try withUnsafeBytes(of: &addr) { b throws(NetlinkError) in
                    try queries.request(type: Int32(RTM_GETADDR), flags: NLM_F_DUMP, body: b) { h in
                        _ = fresh.apply(h)
                        return .more
                    }
                }
            } catch {
                Log.err("netlink: dumping links and addresses (attempt \(attempt)): \(error)")
                continue
            }
            tables = fresh
            stale.dump = false
            if stale.lost {
                stale.lost = false
                last.resyncs += 1
            }
            stale.tables = true
            stale.routes = true
            return
        }
    }

    /// Where one destination's traffic goes for a socket of `uid` (with `mark`): REACH's question, asked at once
    /// (one datagram each way). Nil: no route.
    public func egress(toward q: RouteQuestion) throws(NetlinkError) -> Egress? {
        let question = RouteLookup.Question(family: q.destination.family, destination: q.destination.bytes, mark: q.mark,
                                            uid: q.uid)
        return try lookup.lookUp([question])[0].egress
    }

    /// Where each family's traffic goes, and which links have a default route a socket bound to them would take.
    /// A down link has no routes (the kernel removes them), and loopback carries no app's traffic out, so
    /// neither is asked about.
    private func routes() {
        var questions = AddressFamily.allCases.map { RouteLookup.Question(family: $0) }
        for family in AddressFamily.allCases {
            for link in last.links where link.adminUp && link.arphrd != ARPHRD.loopback {
                questions.append(RouteLookup.Question(family: family, oif: link.index, fibMatch: true))
            }
        }
        // Where a marked socket's traffic goes (Mode=steer), per mark and family.
        let unmarked = questions.count
        for mark in marks {
            for family in AddressFamily.allCases { questions.append(RouteLookup.Question(family: family, mark: mark)) }
        }
        // Where each tunnel's packets leave by: the kernel's route to its endpoint where it knows one.
        let routed = questions.count
        for link in last.links where link.adminUp {
            guard let remote = link.tunnelRemote else { continue }
            questions.append(RouteLookup.Question(family: remote.count == 4 ? .ipv4 : .ipv6, destination: remote))
        }
        let endpointCount = questions.count - routed
        // A userspace VPN's endpoint is unknown to the kernel; its client routes the server by a host route.
        // Read them only while such a tunnel is up: a machine without one never dumps routes.
        var hosts: [(destination: [UInt8], oif: Int32)] = []
        if last.links.contains(where: { $0.adminUp && Stacking.needsHostRoutes($0) }) {
            do { hosts = try lookup.hostRoutes() } catch { Log.err("netlink: reading host routes: \(error)") }
            for h in hosts {
                questions.append(RouteLookup.Question(family: h.destination.count == 4 ? .ipv4 : .ipv6,
                                                      destination: h.destination))
            }
        }
        let answers: [RouteLookup.Answer]
        do { answers = try lookup.lookUp(questions) } catch {
            Log.err("netlink: route lookups: \(error)")
            return
        }
        var egress: [AddressFamily: Egress] = [:]
        var defaults: [DefaultRouteFacts] = []
        var endpoints: [Int32: Egress] = [:]
        var hostRoutes: [HostRouteFacts] = []
        let tunnels = last.links.filter { $0.adminUp && $0.tunnelRemote != nil }
        for (i, a) in answers.enumerated().dropFirst(routed) {
            let k = i - routed
            if k < endpointCount {
                endpoints[tunnels[k].index] = a.egress
            } else if case let .link(oif)? = a.egress {
                // The kernel's choice for the destination (rules, metrics), not the dumped entry's own link.
                let d = hosts[k - endpointCount].destination
                hostRoutes.append(HostRouteFacts(index: oif, destination: KernelTables.text(d, d.count == 4 ? .ipv4 : .ipv6)))
            }
        }
        last.endpointRoutes = endpoints
        last.hostRoutes = hostRoutes
        var marked: [UInt32: [AddressFamily: Egress]] = [:]
        for (q, a) in zip(questions[unmarked..<routed], answers[unmarked..<routed]) {
            marked[q.mark!, default: [:]][q.family] = a.egress
        }
        last.markedEgress = marked
        for (q, a) in zip(questions.prefix(unmarked), answers) {
            if q.oif == nil {
                egress[q.family] = a.egress
            } else if case let .route(_, 0, metric) = a {
                defaults.append(DefaultRouteFacts(index: q.oif!, family: q.family, metric: metric))
            }
        }
        last.egress = egress
        last.defaultRoutes = defaults
    }
}
