// SPDX-License-Identifier: LGPL-2.1-or-later
import CNetlink
import Glibc
import NetpermCore
import NetpermIO

/// The Wi-Fi network of each wifi link, from nl80211 (generic netlink, through libnl-genl), fed from the daemon's
/// event loop. It listens to the "mlme" group (connect, roam, disconnect, (dis)association) and the "config"
/// group (interfaces coming, going, changing type); after any of those it asks again, as `iw dev X link` does:
/// NL80211_CMD_GET_INTERFACE for each interface's SSID, NL80211_CMD_GET_SCAN for the BSS it is associated to.
/// Where the kernel has no nl80211 (no Wi-Fi driver loaded), `start` says so once and there is no watcher.
public final class WifiWatcher {
    private let events: OpaquePointer
    private let queries: QuerySocket
    private let family: UInt16
    private var source: IOSource?
    private var datagrams = EventDatagrams()

    /// By ifindex: every nl80211 interface, with its network when it is a client associated to one.
    public private(set) var networks: [Int32: WifiFacts] = [:]
    public var onChange: (([Int32: WifiFacts]) -> Void)?

    /// A watcher, or nil (logged once, at info) where nl80211 cannot be used.
    public static func start(loop: EventLoop) -> WifiWatcher? {
        do { return try WifiWatcher(loop: loop) } catch {
            Log.info("wifi: \(error); links report no SSID or BSSID")
            return nil
        }
    }

    private init(loop: EventLoop) throws(NetlinkError) {
        guard let e = nl_socket_alloc(), let q = nl_socket_alloc() else {
            throw NetlinkError(code: -NLE_NOMEM, operation: "allocating generic netlink sockets")
        }
        events = e
        var ok = false
        // libnl's socket only resolves nl80211's family and groups; requests go through `queries`.
        defer {
            nl_socket_free(q)
            if !ok { nl_socket_free(e) }
        }
        queries = try QuerySocket(protocol: NETLINK_GENERIC)
        try Self.check(genl_connect(q), "connecting to generic netlink")
        let id = genl_ctrl_resolve(q, "nl80211")
        guard id > 0 else { throw NetlinkError(code: id, operation: "no nl80211 in this kernel (no Wi-Fi driver loaded)") }
        family = UInt16(id)
        try Self.check(genl_connect(e), "connecting the nl80211 event socket")
        for group in ["mlme", "config"] {
            let g = genl_ctrl_resolve_grp(q, "nl80211", group)
            try Self.check(g, "finding nl80211's \(group) group")
            try Self.check(nl_socket_add_membership(e, g), "joining nl80211's \(group) group")
        }
        try Self.check(nl_socket_set_nonblocking(e), "making the nl80211 event socket non-blocking")
        do {
            source = try loop.addIO(fd: nl_socket_get_fd(e), events: IOEvents.readable) { [unowned self] _ in
                self.dataReady()
            }
        } catch {
            throw NetlinkError(code: -NLE_FAILURE, operation: "watching the nl80211 socket (\(error))")
        }
        ok = true
        networks = read()
        Log.info("wifi: watching nl80211 (\(networks.count) Wi-Fi interfaces)")
    }

    deinit {
        source?.cancel()
        nl_socket_free(events)
    }

    private static func check(_ r: Int32, _ operation: String) throws(NetlinkError) {
        guard r >= 0 else { throw NetlinkError(code: r, operation: operation) }
    }

    /// Reads every queued event; if one may have changed a link's network (or some were lost), asks again.
    private func dataReady() {
        var askAgain = false
        do throws(Errno) {
            try datagrams.drain(nl_socket_get_fd(events), lost: { loss in
                if case let .overrun(error) = loss {
                    Log.warning("wifi: reading nl80211 events: \(error); reading the networks again")
                }
                askAgain = true
            }) { b in
                let messages = Nl80211.messages(in: Array(b), family: family)
                if messages.contains(where: { Nl80211.associationCommands.contains($0.command) }) { askAgain = true }
            }
        } catch {
            Log.err("wifi: reading nl80211 events: \(error)")
        }
        guard askAgain else { return }
        let fresh = read()
        guard fresh != networks else { return }
        networks = fresh
        onChange?(fresh)
    }

    /// Every interface and, for those associated, the BSS. A dump the kernel interrupts is read again; one that
    /// still fails leaves what was known.
    private func read() -> [Int32: WifiFacts] {
        for attempt in 1...3 {
            do { return try readOnce() } catch {
                Log.err("wifi: asking nl80211 (attempt \(attempt)): \(error)")
            }
        }
        return networks
    }

    private func readOnce() throws(NetlinkError) -> [Int32: WifiFacts] {
        var fresh: [Int32: WifiFacts] = [:]
        try dump(NL80211_CMD_GET_INTERFACE, ifindex: nil) { m in
            if let (index, ssid) = Nl80211.interface(m) { fresh[index] = WifiFacts(ssid: ssid) }
        }
        for (index, facts) in fresh where facts.ssid != nil {
            do {
                try dump(NL80211_CMD_GET_SCAN, ifindex: index) { m in
                    if let (i, bssid) = Nl80211.associatedBSS(m), i == index { fresh[index]?.bssid = bssid }
                }
            } catch where error.errno != nil {
                // The kernel refused this interface's scan list (it may have gone meanwhile): no BSSID.
                Log.debug("wifi: scan list of interface \(index): \(error)")
            }
        }
        return fresh
    }

    private func dump(_ command: nl80211_commands, ifindex: Int32?,
                      _ each: (Nl80211Message) -> Void) throws(NetlinkError) {
        // struct genlmsghdr: cmd, version, reserved.
        var header = genlmsghdr()
        header.cmd = UInt8(command.rawValue)
        let family = self.family
        try withUnsafeBytes(of: &header) { body throws(NetlinkError) in
            try queries.request(type: Int32(family), flags: NLM_F_DUMP, body: body, attributes: { r in
                if let ifindex { r.attribute(UInt16(NL80211_ATTR_IFINDEX.rawValue), u32: UInt32(bitPattern: ifindex)) }
            }) { h in
                let bytes = Array(UnsafeRawBufferPointer(start: h, count: Int(h.pointee.nlmsg_len)))
                for m in Nl80211.messages(in: bytes, family: family) { each(m) }
                return .more
            }
        }
    }
}
