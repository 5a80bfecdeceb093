// SPDX-License-Identifier: LGPL-2.1-or-later
import CNftables
import Glibc
import NetpermIO

/// Tells when another process changes one of the daemon's tables: the kernel's nftables notifications
/// (NFNLGRP_NFTABLES), so `nft flush ruleset` is seen as it happens, and an idle daemon never wakes up to look.
///
/// A transaction's notifications end with NFT_MSG_NEWGEN: any change to a table (a deletion, an added rule or
/// element) in a transaction of another socket than `ownPortIDs` calls `changed`, once per transaction and table.
/// A quota object running out is told by the kernel itself (an NFT_MSG_NEWOBJ of no socket, port 0, outside any
/// transaction): `objectNotified`. Every
/// notification's header carries the netlink port id of the socket that sent the transaction; the process id in
/// NEWGEN cannot tell: it is the init namespace's, never what getpid() says in a container. Messages lost to a
/// full receive buffer call it too: what they said is unknown.
///
/// The daemon's own transactions run between `quiet()` and `listen(ownCommits:)`, out of the group: loading a
/// table of 10,000 apps is about 100,000 notifications (every chain, rule and element deleted and added), which
/// the kernel would build for nothing and which overran the buffer, so that every whole load was followed by a
/// "repair" loading it again. What others commit meanwhile is told by the ruleset's generation instead.
public final class NftablesMonitor {
    private let socket: NetlinkSocket
    /// Where the generation is asked, kept open: each load reads it twice on the loop, and a socket closed there
    /// would make the loop wait for the kernel's commit lock and a grace period after every commit (NftablesRequest),
    /// while an app's exec, a QUERY, a scope's answer waited behind it (bench figure 23: exec -> scope p99 20 ms).
    private let requests: NetlinkSocket
    private var source: IOSource?
    private var datagrams = EventDatagrams()
    private let family: UInt8
    private let tables: [[UInt8]]
    /// The daemon's own netfilter sockets (libnftables'): their transactions are the daemon's.
    public var ownPortIDs: Set<UInt32> = []
    /// The tables a change was seen to in the transaction whose messages are being read (indices into `tables`).
    private var touched: Set<Int> = []
    public var changed: (_ table: String, _ byPID: UInt32?, _ byName: String?) -> Void = { _, _, _ in }
    /// The kernel's own notice of an object of a table (a quota used up), by the object's name.
    public var objectNotified: (_ table: String, _ object: String) -> Void = { _, _ in }
    /// The generation when `quiet()` left the group; nil while in it.
    private var quietSince: UInt32?
    /// The daemon's other sockets that commit while the monitor listens (elements of units just made): how many
    /// commits they began and finished so far. Their notifications are their own (`ownPortIDs`); when notifications
    /// are lost to a full buffer (thousands of units named a second), the generation tells whether anyone else
    /// committed: no more commits than theirs since the last generation heard is no one else's change.
    public var ownCommits: () -> (started: UInt32, finished: UInt32) = { (0, 0) }
    /// The last generation heard (a NEWGEN, or read at `listen`), and the others' commits finished then.
    private var heard: (generation: UInt32, finished: UInt32)?
    private var finishedBeforeRead: UInt32 = 0, finishedAtLastRead: UInt32 = 0

    public init(loop: EventLoop, family: UInt8 = UInt8(NFPROTO_INET), tables: [String]) throws(Errno) {
        self.family = family
        self.tables = tables.map { Array($0.utf8) }
        socket = try NetlinkSocket(protocol: NETLINK_NETFILTER, groups: 1 << (UInt32(NFNLGRP_NFTABLES.rawValue) - 1),
                                   nonBlocking: true)
        requests = try NetlinkSocket(protocol: NETLINK_NETFILTER)
        // Units named as they are made commit hundreds of times a second under churn, each heard here: room for a
        // burst of their notifications, so that fewer are lost (and must be judged by the generation).
        if (try? SocketOption.setReceiveBuffer(socket.fd, bytes: 4 << 20, force: true)) == nil {
            _ = try? SocketOption.setReceiveBuffer(socket.fd, bytes: 4 << 20, force: false)
        }
        source = try loop.addIO(fd: socket.fd, events: IOEvents.readable) { [unowned self] _ in self.readAll() }
    }

    deinit { source?.cancel() }

    /// Leaves the group for the daemon's own transaction; stays in it if the generation cannot be read (then the
    /// transaction's notifications are heard, and an overrun is taken for another's change, as before).
    public func quiet() {
        guard quietSince == nil, let generation = try? NftablesRequest.generation(on: requests) else { return }
        // The generation first: a commit between the two is both heard and counted, never neither.
        guard setMembership(NETLINK_DROP_MEMBERSHIP) else { return }
        quietSince = generation
    }

    /// Joins the group again after the daemon's own transaction, which committed `ownCommits` times (1, or 0 if it
    /// failed): whether anyone else committed since `quiet()` (any table: notifications are not there to say which).
    public func listen(ownCommits: UInt32) -> Bool {
        guard let before = quietSince else { return false }
        quietSince = nil
        // Joined first, then the generation read: a commit between the two is both heard and counted.
        guard setMembership(NETLINK_ADD_MEMBERSHIP) else { return true }
        let finished = self.ownCommits().finished
        guard let after = try? NftablesRequest.generation(on: requests) else { return true }
        heard = (after, finished)
        finishedAtLastRead = finished
        return after &- before > ownCommits
    }

    private func setMembership(_ option: Int32) -> Bool {
        var group = UInt32(NFNLGRP_NFTABLES.rawValue)
        return (try? sys { setsockopt(socket.fd, SOL_NETLINK, option, &group, socklen_t(MemoryLayout<UInt32>.size)) }) != nil
    }

    /// The port ids of this process's netlink sockets of `protocol` (from /proc/self/net/netlink, whose inodes
    /// are matched against /proc/self/fd): how to recognise libnftables' socket, which it does not expose.
    public static func ownPortIDs(protocol proto: Int32 = NETLINK_NETFILTER) -> Set<UInt32> {
        var inodes: Set<Substring> = []
        var links: [String] = []
        for fd in (try? Files.list("/proc/self/fd")) ?? [] {
            if let target = try? Files.readLink("/proc/self/fd/" + fd) { links.append(target) }
        }
        for t in links where t.hasPrefix("socket:[") { inodes.insert(t.dropFirst(8).dropLast()) }
        var ports: Set<UInt32> = []
        for line in (FD.readText("/proc/self/net/netlink") ?? "").split(separator: "\n").dropFirst() {
            // sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
            let f = line.split(separator: " ")
            guard f.count >= 10, Int32(f[1]) == proto, inodes.contains(f[9]), let port = UInt32(f[2]) else { continue }
            ports.insert(port)
        }
        return ports
    }

    private func readAll() {
        // What the others had finished when the last reading began: every notification read now came after that
        // reading emptied the buffer, so a NEWGEN among them counts whatever they finished since as theirs.
        finishedBeforeRead = finishedAtLastRead
        finishedAtLastRead = ownCommits().finished
        // Messages lost to a full buffer (or a datagram cut short): what they said is unknown.
        try? datagrams.drain(socket.fd, lost: { _ in
            touched = []
            guard othersMayHaveCommitted() else { return }
            for t in tables { changed(String(decoding: t, as: UTF8.self), nil, nil) }
        }) { parse(UnsafeRawBufferPointer($0)) }
    }

    /// Whether the table `name` of the monitor's family exists (`NftablesTable.exists`), asked on the kept socket:
    /// the Enforcer asks on its loop before a whole load (a repair after another process deleted the table, a Mode
    /// change), and a socket closed after a commit that removed anything waits for a grace period.
    public func tableExists(_ name: String) throws(Errno) -> Bool? {
        try NftablesTable.exists(family: family, name: name, on: requests)
    }

    /// Reads the generation to count from (once `ownCommits` is set): notifications lost before any other was
    /// heard are then judged by it too, not taken for another process's change.
    public func countFromNow() {
        let finished = ownCommits().finished
        finishedAtLastRead = finished
        if let now = try? NftablesRequest.generation(on: requests) { heard = (now, finished) }
    }

    /// After notifications were lost: whether more commits were made since the last generation heard than the
    /// daemon's other sockets began since (true when it cannot tell).
    private func othersMayHaveCommitted() -> Bool {
        // What the others finished is read before the generation: one finishing in between counts as theirs.
        let finished = ownCommits().finished
        guard let heard, let now = try? NftablesRequest.generation(on: requests) else { return true }
        self.heard = (now, finished)
        return now &- heard.generation > ownCommits().started &- heard.finished
    }

    /// The kernel's notice that an object of an `inet` table changed by itself (a quota used up) carries the
    /// family of the packet that did it (`ip` or `ip6`), not the table's: `nft monitor` shows
    /// `add quota ip netpermd_usage b_...`.
    private func isObjectNotice(_ kind: UInt32, _ port: UInt32, _ messageFamily: UInt8) -> Bool {
        guard family == UInt8(NFPROTO_INET), kind == NFT_MSG_NEWOBJ.rawValue, port == 0 else { return false }
        return messageFamily == UInt8(NFPROTO_IPV4) || messageFamily == UInt8(NFPROTO_IPV6)
    }

    private func parse(_ b: UnsafeRawBufferPointer) {
        let subsys = UInt16(NFNL_SUBSYS_NFTABLES) << 8
        for m in NetlinkMessages(b) {
            let msg = m.payload
            guard m.type & 0xFF00 == subsys, msg.count >= 4 else { continue }
            let kind = UInt32(m.type & 0xFF)
            if kind == NFT_MSG_NEWGEN.rawValue {
                // Only a newer one: notifications queued before the daemon's own load left the group are read after
                // `listen` has counted from the generation after it.
                if let g = NftablesRequest.attribute(msg, UInt16(NFTA_GEN_ID.rawValue)),
                   heard.map({ Int32(bitPattern: g &- $0.generation) > 0 }) ?? true {
                    heard = (g, finishedBeforeRead)
                }
                guard !touched.isEmpty else { continue }
                let which = touched.sorted()
                touched = []
                let pid = NftablesRequest.attribute(msg, UInt16(NFTA_GEN_PROC_PID.rawValue))
                guard !ownPortIDs.contains(m.port) else { continue }
                let name = NftablesRequest.attributeBytes(msg, UInt16(NFTA_GEN_PROC_NAME.rawValue)).map(Netlink.string)
                for t in which { changed(String(decoding: tables[t], as: UTF8.self), pid, name) }
            } else if kind != NFT_MSG_TRACE.rawValue, msg[0] == family || isObjectNotice(kind, m.port, msg[0]),
                      let name = NftablesRequest.attributeBytes(msg, 1),
                      let t = tables.firstIndex(of: Array(name.prefix { $0 != 0 })) {
                // Attribute 1 is the table's name in every message that belongs to a table.
                if kind == NFT_MSG_NEWOBJ.rawValue, m.port == 0,
                   let object = NftablesRequest.attributeBytes(msg, UInt16(NFTA_OBJ_NAME.rawValue)) {
                    objectNotified(String(decoding: tables[t], as: UTF8.self), Netlink.string(object))
                } else {
                    touched.insert(t)
                }
            }
        }
    }
}
